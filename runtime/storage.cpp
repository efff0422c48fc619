// Host storage: a pool of freed large buffers, allocation, and element access in each dtype's
// own representation.
#include "runtime/storage.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "ir/alu.h"

namespace tinyrw {

namespace {
constexpr size_t kPoolMin = 64 * 1024;          // smaller buffers are not worth pooling
constexpr size_t kPoolLimit = size_t{1} << 30;  // bytes kept for reuse at most

struct Pool {
  std::mutex mu;
  std::unordered_multimap<size_t, BufferBytes> free;
  size_t bytes = 0;
};
Pool& pool() {
  static Pool* p = new Pool();
  return *p;
}
}  // namespace

Storage::~Storage() {
  const size_t n = bytes.size();
  if (n < kPoolMin) return;
  Pool& p = pool();
  std::lock_guard lock(p.mu);
  if (p.bytes + n > kPoolLimit) return;
  p.bytes += n;
  p.free.emplace(n, std::move(bytes));
}

std::shared_ptr<Storage> allocate_storage(DType dtype, int64_t size) {
  static std::atomic<int64_t> next_id{1};
  auto s = std::make_shared<Storage>();
  s->id = next_id++;
  s->dtype = dtype;
  s->size = size;
  // the Tensor API keeps sizes within kMaxTensorBytes; this guards hand-built graphs too
  i128 bytes = 0;
  if (size >= 0) bytes = static_cast<i128>(size) * dtype.itemsize();
  if (size < 0 || bytes > kMaxTensorBytes)
    throw TensorError(
        fmt::format("a buffer of {} {} elements exceeds the tensor size limit of {} bytes", size,
                    dtype.repr(), kMaxTensorBytes));
  const size_t n = static_cast<size_t>(bytes);
  {
    Pool& p = pool();
    std::lock_guard lock(p.mu);
    if (auto it = p.free.find(n); it != p.free.end()) {
      s->bytes = std::move(it->second);
      p.bytes -= n;
      p.free.erase(it);
      return s;
    }
  }
  try {
    s->bytes.assign(n, 0);
  } catch (const std::bad_alloc&) {
    throw TensorError(
        fmt::format("cannot allocate a buffer of {} {} elements ({} bytes): out of memory", size,
                    dtype.repr(), n));
  } catch (const std::length_error&) {
    throw TensorError(fmt::format(
        "cannot allocate a buffer of {} {} elements ({} bytes): too large for this host", size,
        dtype.repr(), n));
  }
  return s;
}

Arg load_element(const Storage& s, int64_t i) {
  if (i < 0 || i >= s.size) {
    throw std::out_of_range(
        fmt::format("INTERP: load of element {} from a buffer of {}", i, s.size));
  }
  const uint8_t* p = s.bytes.data() + i * s.dtype.itemsize();
  auto get = [&](auto x) {
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (s.dtype.kind()) {
    case ScalarKind::Bool:
      return Arg::boolean(get(uint8_t{}) != 0);
    case ScalarKind::Int8:
      return Arg::integer(get(int8_t{}));
    case ScalarKind::Int16:
      return Arg::integer(get(int16_t{}));
    case ScalarKind::Int32:
      return Arg::integer(get(int32_t{}));
    case ScalarKind::Int64:
      return Arg::integer(get(int64_t{}));
    case ScalarKind::UInt8:
      return Arg::integer(get(uint8_t{}));
    case ScalarKind::UInt16:
      return Arg::integer(get(uint16_t{}));
    case ScalarKind::UInt32:
      return Arg::integer(get(uint32_t{}));
    case ScalarKind::UInt64:
      return Arg::integer(get(uint64_t{}));
    case ScalarKind::Float16:
      return Arg::real(half_to_float(get(uint16_t{})));
    case ScalarKind::BFloat16:
      return Arg::real(bfloat16_to_float(get(uint16_t{})));
    case ScalarKind::Float32:
      return Arg::real(get(float{}));
    case ScalarKind::Float64:
      return Arg::real(get(double{}));
    default:
      throw std::logic_error("INTERP: cannot load " + s.dtype.repr());
  }
}

void store_element(Storage& s, int64_t i, const Arg& v) {
  uint8_t* p = s.bytes.data() + i * s.dtype.itemsize();
  const Arg c = cast_value(s.dtype, v);
  auto put = [&](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (s.dtype.kind()) {
    case ScalarKind::Bool:
      put(static_cast<uint8_t>(c.as_bool()));
      break;
    case ScalarKind::Int8:
      put(static_cast<int8_t>(c.as_int()));
      break;
    case ScalarKind::Int16:
      put(static_cast<int16_t>(c.as_int()));
      break;
    case ScalarKind::Int32:
      put(static_cast<int32_t>(c.as_int()));
      break;
    case ScalarKind::Int64:
      put(static_cast<int64_t>(c.as_int()));
      break;
    case ScalarKind::UInt8:
      put(static_cast<uint8_t>(c.as_int()));
      break;
    case ScalarKind::UInt16:
      put(static_cast<uint16_t>(c.as_int()));
      break;
    case ScalarKind::UInt32:
      put(static_cast<uint32_t>(c.as_int()));
      break;
    case ScalarKind::UInt64:
      put(static_cast<uint64_t>(c.as_int()));
      break;
    case ScalarKind::Float16:
      put(float_to_half(static_cast<float>(c.as_float())));
      break;
    case ScalarKind::BFloat16:
      put(float_to_bfloat16(static_cast<float>(c.as_float())));
      break;
    case ScalarKind::Float32:
      put(static_cast<float>(c.as_float()));
      break;
    case ScalarKind::Float64:
      put(c.as_float());
      break;
    default:
      throw std::logic_error("INTERP: cannot store " + s.dtype.repr());
  }
}

}  // namespace tinyrw

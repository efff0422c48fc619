#include "tensor/storage.h"

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "ir/alu.h"

namespace tinyrw {

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

#include "tensor/storage.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "ir/alu.h"

namespace tinyrw {

namespace {
constexpr size_t kPoolMin = 64 * 1024;          // smaller buffers are not worth pooling
constexpr size_t kPoolLimit = size_t{1} << 30;  // bytes kept for reuse at most

struct Pool {
  std::mutex mu;
  std::unordered_multimap<size_t, std::vector<uint8_t>> free;
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

void add_storages(std::vector<std::shared_ptr<Storage>>& to,
                  const std::vector<std::shared_ptr<Storage>>& from) {
  if (from.empty() || &to == &from) return;
  if (from.size() <= 8) {  // a few to look up: scanning `to` costs no more than a set of it
    for (const auto& s : from)
      if (std::find(to.begin(), to.end(), s) == to.end()) to.push_back(s);
    return;
  }
  std::unordered_set<const Storage*> have;
  have.reserve(to.size() + from.size());
  for (const auto& s : to) have.insert(s.get());
  for (const auto& s : from)
    if (have.insert(s.get()).second) to.push_back(s);
}

// ---- StorageList: a persistent set of buffers --------------------------------------------------

struct StorageList::Node {
  Items own;                   // a leaf's buffers, each once
  std::shared_ptr<Node> a, b;  // or the two lists merged here, until listed (then a leaf)
  ~Node();
};

// Releasing a long chain of merges one node at a time, off the C++ stack.
StorageList::Node::~Node() {
  static thread_local auto* pending = new std::vector<std::shared_ptr<Node>>();
  static thread_local bool draining = false;
  if (a) pending->push_back(std::move(a));
  if (b) pending->push_back(std::move(b));
  if (draining) return;
  draining = true;
  while (!pending->empty()) {
    std::shared_ptr<Node> n = std::move(pending->back());
    pending->pop_back();
    n.reset();  // may run ~Node again, which only queues
  }
  draining = false;
}

StorageList::StorageList(Items items) {
  if (items.empty()) return;
  node_ = std::make_shared<Node>();
  add_storages(node_->own, items);  // deduplicated
}

StorageList StorageList::merge(const StorageList& x, const StorageList& y) {
  if (y.empty() || x.node_ == y.node_) return x;
  if (x.empty()) return y;
  const Node &a = *x.node_, &b = *y.node_;
  // two small leaves: a leaf again, or one of them when it holds the other (the common case of
  // a graph over a few buffers allocates nothing)
  constexpr size_t kSmall = 16;
  if (!a.a && !b.a && a.own.size() + b.own.size() <= kSmall) {
    auto holds = [](const Items& big, const Items& small) {
      for (const auto& s : small)
        if (std::find(big.begin(), big.end(), s) == big.end()) return false;
      return true;
    };
    if (holds(a.own, b.own)) return x;
    if (holds(b.own, a.own)) return y;
    Items both = a.own;
    add_storages(both, b.own);
    return StorageList(std::move(both));
  }
  StorageList out;
  out.node_ = std::make_shared<Node>();
  out.node_->a = x.node_;
  out.node_->b = y.node_;
  return out;
}

const StorageList::Items& StorageList::items() const {
  static const Items kNone;
  if (!node_) return kNone;
  if (!node_->a) return node_->own;
  // every buffer under this node once, left before right, walking shared nodes once
  Items out;
  std::unordered_set<const Node*> visited;
  std::unordered_set<const Storage*> seen;
  std::vector<const Node*> stack{node_.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!visited.insert(n).second) continue;
    if (!n->a) {
      for (const auto& s : n->own)
        if (seen.insert(s.get()).second) out.push_back(s);
      continue;
    }
    stack.push_back(n->b.get());
    stack.push_back(n->a.get());
  }
  // The node becomes a leaf of its list and lets go of the merges under it (released through
  // ~Node's queue when nothing else holds them). Keeping them as well would hold one list per
  // listed step: a chain listed at every step (a loop calling storages() or gradient()) kept
  // n^2/2 buffer references alive.
  node_->own = std::move(out);
  const std::shared_ptr<Node> a = std::move(node_->a), b = std::move(node_->b);
  return node_->own;
}

int64_t next_effect_id() {
  static std::atomic<int64_t> next{1};
  return next++;
}

}  // namespace tinyrw

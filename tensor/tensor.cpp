#include "tensor/tensor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <tuple>
#include <unordered_set>

#include <fmt/format.h>

#include "dsl/compiled.h"
#include "ir/alu.h"
#include "ir/builders.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/rewrite.h"
#include "rules_gen/schedule.h"
#include "runtime/device.h"
#include "runtime/gpu_runtime.h"
#include "tensor/gradient.h"
#include "tensor/multi.h"
#include "tensor/storage.h"

namespace tinyrw {

namespace {

std::string dims_repr(const Dims& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

// The element count of a shape of non-negative sizes, exact in i128 up to kSaturated (far beyond
// any limit, and small enough that count * itemsize still fits): a count that overflows int64 is
// seen, never wrapped.
constexpr i128 kSaturated = static_cast<i128>(1) << 100;
i128 exact_product(const Dims& d) {
  i128 p = 1;
  for (int64_t x : d) {
    if (x == 0) return 0;
    p = p > kSaturated / x ? kSaturated : p * x;
  }
  return p;
}
int64_t product(const Dims& d) { return static_cast<int64_t>(exact_product(d)); }

std::string size_repr(i128 n) { return n >= kSaturated ? "more than 2^100" : to_string(n); }

// A shape the API may build: sizes >= 0, and its bytes within kMaxTensorBytes.
void check_shape(const Dims& shape, DType dtype, std::string_view what) {
  for (int64_t d : shape)
    if (d < 0)
      throw TensorError(
          fmt::format("{}: shape {} has a negative dimension", what, dims_repr(shape)));
  const i128 n = exact_product(shape),
             bytes = std::min(n * std::max(1, dtype.itemsize()), kSaturated);
  if (bytes > kMaxTensorBytes) {
    throw TensorError(fmt::format(
        "{}: shape {} has {} elements of {} ({} bytes), more than the tensor size limit of {} "
        "bytes",
        what, dims_repr(shape), size_repr(n), dtype.repr(), size_repr(bytes), kMaxTensorBytes));
  }
}

// a + b for sizes, refused past int64 instead of wrapping.
int64_t add_sizes(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r) || r > kMaxTensorBytes)
    throw TensorError(fmt::format("{}: a size of {} + {} exceeds the tensor size limit of {}", what,
                                  a, b, kMaxTensorBytes));
  return r;
}

// Host memory for n values made on the host (creation helpers): an allocation failure is a
// TensorError, not a crash.
template <class T>
std::vector<T> host_values(int64_t n, std::string_view what) {
  try {
    return std::vector<T>(static_cast<size_t>(n));
  } catch (const std::bad_alloc&) {
    throw TensorError(fmt::format("{}: cannot allocate {} values on the host", what, n));
  } catch (const std::length_error&) {
    throw TensorError(fmt::format("{}: cannot allocate {} values on the host", what, n));
  }
}

}  // namespace

// Refuses a value that `dtype` cannot hold: an int out of range (or a non-finite float for an
// int), a finite float that overflows to inf. A fraction truncates toward zero, as CAST does.
// `element` (when >= 0) names the value's position in the error.
void check_fits(DType dtype, const Arg& v, std::string_view what, int64_t element) {
  auto where = [&] {
    return element < 0 ? std::string(what) : fmt::format("{} (element {})", what, element);
  };
  if (dtype.is_bool()) return;
  if (dtype.is_int()) {
    bool ok = true;
    i128 x = 0;
    if (v.is_float()) {
      const double f = v.as_float();
      ok = std::isfinite(f) && std::fabs(f) < 0x1p120;
      if (ok) x = static_cast<i128>(std::trunc(f));
    } else {
      x = v.as_int();
    }
    if (!ok || x < dtype.int_min() || x > dtype.int_max()) {
      throw TensorError(fmt::format("{}: the value {} does not fit {} (range {} to {})", where(),
                                    v.repr(), dtype.repr(), to_string(dtype.int_min()),
                                    to_string(dtype.int_max())));
    }
  } else if (dtype.is_float()) {
    const double f = v.is_float() ? v.as_float() : static_cast<double>(v.as_int());
    if (std::isfinite(f) && !std::isfinite(truncate_float(dtype, f))) {
      throw TensorError(fmt::format("{}: the value {} overflows {} (largest finite value {})",
                                    where(), v.repr(), dtype.repr(), dtype.float_max()));
    }
  }
}

namespace {

// Every tensor the API makes has a shape within the size limit; a shape error in a graph built by
// hand is raised where it was built.
void check_graph(const UOp& u) {
  if (!u) throw TensorError("a tensor needs a graph, and the UOp given is empty");
  std::optional<Shape> s;
  try {
    s = u.shape_opt();
  } catch (const GraphError& e) {
    throw TensorError(e.what());
  }
  if (!s) return;
  Dims d;
  for (const SInt& x : *s) {
    if (!x.is_int()) return;  // symbolic sizes are bound later
    d.push_back(x.value());
  }
  check_shape(d, u.dtype(), op_name(u.op()));
}

}  // namespace

// The live tensors, a doubly linked list through the Tensors themselves (a link and an unlink
// are O(1), and only an assignment walks the list).
struct LiveTensors {
  std::mutex mutex;
  Tensor* head = nullptr;
  AssignmentJournal* journal = nullptr;  // the innermost open one
  static LiveTensors& get() {
    static LiveTensors* live = new LiveTensors;  // never destroyed: tensors outlive statics
    return *live;
  }
};

void Tensor::link() {
  LiveTensors& live = LiveTensors::get();
  std::lock_guard lock(live.mutex);
  live_next_ = live.head;
  if (live.head) live.head->live_prev_ = this;
  live.head = this;
}

Tensor::~Tensor() {
  LiveTensors& live = LiveTensors::get();
  std::lock_guard lock(live.mutex);
  (live_prev_ ? live_prev_->live_next_ : live.head) = live_next_;
  if (live_next_) live_next_->live_prev_ = live_prev_;
  for (AssignmentJournal* j = live.journal; j; j = j->outer_)
    std::erase_if(j->entries_, [&](const AssignmentJournal::Entry& e) { return e.tensor == this; });
}

AssignmentJournal::AssignmentJournal() {
  LiveTensors& live = LiveTensors::get();
  std::lock_guard lock(live.mutex);
  outer_ = live.journal;
  live.journal = this;
}

AssignmentJournal::~AssignmentJournal() {
  LiveTensors& live = LiveTensors::get();
  std::lock_guard lock(live.mutex);
  live.journal = outer_;
  if (committed_) {
    if (outer_) outer_->entries_.insert(outer_->entries_.end(), entries_.begin(), entries_.end());
    return;
  }
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    it->tensor->uop_ = it->uop;
    it->tensor->deps_ = it->deps;
  }
}

Tensor::Tensor(UOp u, StorageList deps) : uop_(std::move(u)), deps_(std::move(deps)) {
  check_graph(uop_);
  link();
}
Tensor::Tensor(const Tensor& o)
    : uop_(o.uop_),
      deps_(o.deps_),
      grad_(o.grad_),
      computed_by_(o.computed_by_),
      realized_view_(o.realized_view_),
      computed_by_storages_(o.computed_by_storages_) {
  link();
}
Tensor::Tensor(Tensor&& o) noexcept
    : uop_(std::move(o.uop_)),
      deps_(std::move(o.deps_)),
      grad_(std::move(o.grad_)),
      computed_by_(std::move(o.computed_by_)),
      realized_view_(std::move(o.realized_view_)),
      computed_by_storages_(std::move(o.computed_by_storages_)) {
  link();
}
// Assignment copies the state; each object keeps its own place in the list.
Tensor& Tensor::operator=(const Tensor& o) {
  if (this != &o) {
    uop_ = o.uop_;
    deps_ = o.deps_;
    grad_ = o.grad_;
    computed_by_ = o.computed_by_;
    realized_view_ = o.realized_view_;
    computed_by_storages_ = o.computed_by_storages_;
  }
  return *this;
}
Tensor& Tensor::operator=(Tensor&& o) noexcept {
  if (this != &o) {
    uop_ = std::move(o.uop_);
    deps_ = std::move(o.deps_);
    grad_ = std::move(o.grad_);
    computed_by_ = std::move(o.computed_by_);
    realized_view_ = std::move(o.realized_view_);
    computed_by_storages_ = std::move(o.computed_by_storages_);
  }
  return *this;
}

// ---- creation
// ---------------------------------------------------------------------------------------

Tensor Tensor::from_uop(UOp u, const std::vector<Tensor>& reads) {
  if (!u) throw TensorError("from_uop: the UOp given is empty");
  // every STORE and kernel CALL of a hand-built graph gets an effect number (rules/schedule.rw
  // number_effects), as assign() and custom_kernel() give their own (kernel bodies are left alone)
  u = graph_rewrite(u, &rules::number_effects(),
                    {.walk = true, .enter_calls = false, .name = "from_uop"});
  // ALU nodes made with UOp::make skip the builders' typing: check them here, where the graph
  // becomes a tensor, rather than in a device's compiler at realize
  for (const UOp& n : toposort(u)) {
    if (!op_info(n.op()).is_alu()) continue;
    DType want;
    try {
      want = alu_result_dtype(n.op(), n.src());
    } catch (const GraphError& e) {
      throw TensorError(fmt::format("from_uop: {}", e.what()));
    }
    if (want != n.dtype())
      throw TensorError(fmt::format("from_uop: {} of these sources gives {}, not {}",
                                    op_name(n.op()), want.repr(), n.dtype().repr()));
  }
  StorageList deps;
  for (const Tensor& t : reads) deps = StorageList::merge(deps, t.deps_);
  return Tensor(std::move(u), std::move(deps));
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> s, const Dims& shape) {
  if (s->device.empty()) s->device = default_device();
  if (is_gpu_device(s->device)) (void)gpu_runtime(s->device);  // one that cannot open says why
  const UOp buf = buffer_uop(s->dtype, s->id, s->size, s->device);
  return Tensor(buffer_view(buf, to_shape(shape)), {std::move(s)});
}

Tensor Tensor::from_bytes(const uint8_t* data, size_t nbytes, Dims shape, DType dtype) {
  check_shape(shape, dtype, "from_bytes");
  const i128 want = exact_product(shape) * dtype.itemsize();
  if (static_cast<i128>(nbytes) != want)
    throw TensorError(fmt::format("from_bytes: {} bytes do not fill shape {} of {} ({} bytes)",
                                  nbytes, dims_repr(shape), dtype.name(), size_repr(want)));
  auto s = allocate_storage(dtype, product(shape));
  if (nbytes) std::memcpy(s->bytes.data(), data, nbytes);
  if (dtype.is_bool())
    for (size_t i = 0; i < nbytes; ++i) s->bytes[i] = s->bytes[i] != 0;
  return from_storage(std::move(s), shape);
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& data, Dims shape, DType dtype) {
  check_shape(shape, dtype, "from_vector");
  if (static_cast<i128>(data.size()) != exact_product(shape)) {
    throw TensorError(fmt::format("{} values do not fill shape {}", data.size(), dims_repr(shape)));
  }
  auto s = allocate_storage(dtype, static_cast<int64_t>(data.size()));
  for (size_t i = 0; i < data.size(); ++i) {
    const Arg v = std::is_floating_point_v<T> ? Arg::real(static_cast<double>(data[i]))
                                              : Arg::integer(static_cast<i128>(data[i]));
    check_fits(dtype, v, "from_vector", static_cast<int64_t>(i));
    store_element(*s, static_cast<int64_t>(i), v);
  }
  return from_storage(std::move(s), shape);
}
// every element type the API takes (a type missing here would fail only at link time)
template Tensor Tensor::from_vector(const std::vector<float>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<double>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<bool>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<int8_t>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<int16_t>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<int32_t>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<int64_t>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<uint8_t>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<uint16_t>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<uint32_t>&, Dims, DType);
template Tensor Tensor::from_vector(const std::vector<uint64_t>&, Dims, DType);

Tensor Tensor::full(Dims shape, double value, DType dtype) {
  check_shape(shape, dtype, "full");
  check_fits(dtype, Arg::real(value), "full");
  return constant(std::move(shape), value, dtype);
}

Tensor Tensor::constant(Dims shape, double value, DType dtype) {
  const UOp c =
      dtype.is_float() ? UOp::cfloat(value, dtype) : UOp::constant(dtype, Arg::real(value));
  return Tensor(c.reshape(Shape(shape.size(), SInt(1))).expand(to_shape(shape)), {});
}

Tensor Tensor::empty(Dims shape, DType dtype) {
  check_shape(shape, dtype, "empty");
  std::shared_ptr<Storage> s = allocate_storage(dtype, product(shape));
  s->uninitialized = true;
  return from_storage(std::move(s), shape);
}

Tensor Tensor::arange(int64_t start, int64_t stop, int64_t step, DType dtype) {
  if (step == 0) throw TensorError("arange step must not be zero");
  // exact in i128: the count and the values never wrap (a value dtype cannot hold is refused by
  // from_vector)
  const i128 span = static_cast<i128>(stop) - start + step + (step > 0 ? -1 : 1);
  const i128 count = std::max<i128>(0, span / step);
  if (count > kMaxTensorBytes)
    throw TensorError(fmt::format("arange({}, {}, {}): {} elements exceed the tensor size limit",
                                  start, stop, step, to_string(count)));
  const int64_t n = static_cast<int64_t>(count);
  check_shape({n}, dtype, "arange");
  // As tinygrad's: a scan of n steps shifted by start - step, no buffer. Reduce collapse
  // (rules/collapse.rw) folds the scan to the loop index, so a kernel using the arange reads no
  // memory for it and a gather by it collapses to one read. Where the scan's partial sums or the
  // shift do not fit the dtype (the values may still), the values are made on the host.
  const i128 first = start, last = start + static_cast<i128>(n > 0 ? n - 1 : 0) * step;
  const i128 reach = static_cast<i128>(n) * step, shift = static_cast<i128>(start) - step;
  auto fits = [&](i128 x) {  // in the dtype, and exact as the double full() takes
    const bool exact = x > -(i128{1} << 53) && x < (i128{1} << 53);
    return exact && (dtype.is_float() || (x >= dtype.int_min() && x <= dtype.int_max()));
  };
  if (n > 0 && !dtype.is_bool() && fits(first) && fits(last) && fits(reach) && fits(shift))
    return full({n}, static_cast<double>(step), dtype).cumulative_one_stage(0, Op::Add) +
           full({}, static_cast<double>(shift), dtype);
  std::vector<int64_t> v = host_values<int64_t>(n, "arange");
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<int64_t>(start + static_cast<i128>(i) * step);
  return from_vector(v, {n}, dtype);
}

Tensor Tensor::eye(int64_t n, DType dtype) {
  check_shape({n, n}, dtype, "eye");
  std::vector<double> v = host_values<double>(n * n, "eye");
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i * n + i)] = 1;
  return from_vector(v, {n, n}, dtype);
}

// ---- properties
// ------------------------------------------------------------------------------------------

Dims Tensor::shape() const { return to_dims(uop_.shape()); }
int64_t Tensor::numel() const { return product(shape()); }  // within the limit: checked when built

int Tensor::axis(int a) const {
  const int n = static_cast<int>(ndim());
  if (a < -n || a >= std::max(n, 1)) {
    throw TensorError(fmt::format("axis {} is out of range for a tensor of {} dimensions", a, n));
  }
  return a < 0 ? a + n : a;
}

// ---- elementwise
// ---------------------------------------------------------------------------------------

Tensor Tensor::scalar_like(double v) const {
  // an operand, not a user's fill value: 1e300 next to a float32 tensor becomes inf as in any
  // float arithmetic, so no fits check here
  if (dtype().is_float()) return constant(shape(), v, dtype());
  // next to an integer or bool tensor a whole number keeps its dtype, made there directly (a
  // float32 detour rounded 16777217 to 16777216) and refused when it does not fit (300 next to
  // int8 wrapped); a fraction or an infinity makes the operation float
  if (!std::isfinite(v) || std::floor(v) != v) return constant(shape(), v, dtypes::default_float());
  check_fits(dtype(), Arg::real(v), "a scalar operand");
  return constant(shape(), v, dtype());
}

Tensor Tensor::cast(DType d) const {
  if (d == dtype()) return *this;
  return with(uop_.cast(d));
}

// numpy broadcasting: shapes align on the right, size-1 axes stretch.
static Dims broadcast_shape(const Dims& a, const Dims& b, std::string_view what) {
  const size_t n = std::max(a.size(), b.size());
  Dims out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i + a.size() >= n ? a[i + a.size() - n] : 1;
    const int64_t y = i + b.size() >= n ? b[i + b.size() - n] : 1;
    if (x != y && x != 1 && y != 1) {
      throw TensorError(
          fmt::format("cannot broadcast {} and {} for {}", dims_repr(a), dims_repr(b), what));
    }
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Tensor Tensor::binary(Op op, const Tensor& o) const {
  const Dims out = broadcast_shape(shape(), o.shape(), op_name(op));
  const DType d = least_upper_dtype(dtype(), o.dtype());
  const Tensor x = cast(d).expand(out), y = o.cast(d).expand(out);
  StorageList deps = StorageList::merge(deps_, o.deps_);
  return Tensor(x.uop_.alu(op, {y.uop_}), std::move(deps));
}

Tensor Tensor::alu(Op op, const std::vector<Tensor>& srcs) {
  if (srcs.empty() || !op_info(op).is_alu() ||
      !op_info(op).accepts_arity(static_cast<int>(srcs.size()))) {
    throw TensorError(fmt::format("{} is not an ALU op of {} sources", op_name(op), srcs.size()));
  }
  std::vector<UOp> src;
  StorageList deps;
  for (const Tensor& t : srcs) {
    if (t.shape() != srcs[0].shape()) {
      throw TensorError(fmt::format("{}: sources have different shapes", op_name(op)));
    }
    src.push_back(t.uop_);
    deps = StorageList::merge(deps, t.deps_);
  }
  DType d;
  try {
    d = alu_result_dtype(op, src);
  } catch (const GraphError& e) {
    throw TensorError(e.what());
  }
  return Tensor(UOp::make(op, d, src), std::move(deps));
}

Tensor Tensor::operator-(const Tensor& o) const { return *this + (-o); }
Tensor Tensor::operator-() const {
  if (dtype().is_bool()) return logical_not();
  if (dtype().is_float() || !dtype().is_unsigned()) return *this * constant(shape(), -1, dtype());
  return order_reversed() + 1.0;  // -x modulo 2^bits: ~x + 1 (-1 is no unsigned operand)
}
Tensor Tensor::operator/(const Tensor& o) const {
  const Tensor a = cast(least_upper_float(dtype())), b = o.cast(least_upper_float(o.dtype()));
  return a * b.reciprocal();
}
// -x for floats; for ints ~x (x xor all ones), since -x maps an unsigned 0 to itself and wraps
// INT_MIN to itself, so that min of {0, 5} as uint8 was 5; not x for bools.
Tensor Tensor::order_reversed() const {
  if (dtype().is_float()) return -*this;
  if (dtype().is_bool()) return logical_not();
  const UOp ones =
      UOp::constant(dtype(), Arg::integer(dtype().is_unsigned() ? dtype().int_max() : -1));
  return bitwise_xor(Tensor(ones.reshape(Shape(ndim(), SInt(1))).expand(to_shape(shape())), {}));
}
Tensor Tensor::logical_not() const { return ne(full(shape(), 1, dtypes::bool_)); }
Tensor Tensor::where(const Tensor& a, const Tensor& b) const {
  const Dims s = broadcast_shape(broadcast_shape(shape(), a.shape(), "where"), b.shape(), "where");
  const DType d = least_upper_dtype(a.dtype(), b.dtype());
  const Tensor ca = cast(dtypes::bool_).expand(s), ta = a.cast(d).expand(s),
               tb = b.cast(d).expand(s);
  const StorageList deps = StorageList::merge(StorageList::merge(ca.deps_, ta.deps_), tb.deps_);
  return Tensor(ca.uop_.alu(Op::Where, {ta.uop_, tb.uop_}), std::move(deps));
}
Tensor Tensor::unary_float(Op op) const {
  const Tensor x = cast(least_upper_float(dtype()));
  return x.with(UOp::make(op, x.dtype(), {x.uop_}));
}

// ---- movement
// --------------------------------------------------------------------------------------------

Tensor Tensor::reshape(Dims s) const {
  const int64_t total = numel();
  Dims known_dims;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) throw TensorError("reshape can infer only one dimension (-1)");
      infer = static_cast<int>(i);
    } else if (s[i] < 0) {
      throw TensorError("reshape to " + dims_repr(s) + ": negative dimension");
    } else {
      known_dims.push_back(s[i]);
    }
  }
  const i128 known = exact_product(known_dims);  // exact: a product that wraps cannot match
  if (infer >= 0) {
    if (known == 0 || total % known != 0) {
      throw TensorError(fmt::format("cannot reshape {} to {}", dims_repr(shape()), dims_repr(s)));
    }
    s[static_cast<size_t>(infer)] = static_cast<int64_t>(total / known);
  }
  if (exact_product(s) != total) {
    throw TensorError(fmt::format("cannot reshape {} ({} elements) to {}", dims_repr(shape()),
                                  total, dims_repr(s)));
  }
  return with(uop_.reshape(to_shape(s)));
}

Tensor Tensor::permute(std::vector<int> order) const {
  const size_t n = ndim();
  if (order.size() != n)
    throw TensorError(fmt::format("permute needs {} axes, got {}", n, order.size()));
  std::vector<bool> seen(n, false);
  std::vector<int64_t> perm;
  for (int& a : order) {
    a = axis(a);
    if (seen[static_cast<size_t>(a)]) throw TensorError("permute repeats an axis");
    seen[static_cast<size_t>(a)] = true;
    perm.push_back(a);
  }
  return with(uop_.permute(perm));
}

Tensor Tensor::transpose(int a, int b) const {
  std::vector<int> order(ndim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[static_cast<size_t>(axis(a))], order[static_cast<size_t>(axis(b))]);
  return permute(order);
}

Tensor Tensor::expand(Dims s) const {
  Dims cur = shape();
  if (s.size() < cur.size())
    throw TensorError(fmt::format("cannot expand {} to {}", dims_repr(cur), dims_repr(s)));
  Tensor t = *this;
  if (s.size() > cur.size()) {
    Dims padded(s.size() - cur.size(), 1);
    padded.insert(padded.end(), cur.begin(), cur.end());
    t = reshape(padded);
    cur = padded;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) s[i] = cur[i];
    if (s[i] < 0 || (cur[i] != s[i] && cur[i] != 1)) {
      throw TensorError(fmt::format("cannot expand {} to {}", dims_repr(shape()), dims_repr(s)));
    }
  }
  return t.with(t.uop_.expand(to_shape(s)));
}

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> padding) const {
  const Dims s = shape();
  if (padding.size() != s.size())
    throw TensorError(fmt::format("pad needs {} (before, after) pairs", s.size()));
  Dims off, out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (padding[i].first < 0 || padding[i].second < 0)
      throw TensorError("pad amounts must not be negative");
    off.push_back(padding[i].first);
    out.push_back(add_sizes(add_sizes(s[i], padding[i].first, "pad"), padding[i].second, "pad"));
  }
  return with(uop_.pad(to_shape(off), to_shape(out)));
}

Tensor Tensor::shrink(std::vector<std::pair<int64_t, int64_t>> ranges) const {
  const Dims s = shape();
  if (ranges.size() != s.size())
    throw TensorError(fmt::format("shrink needs {} (start, end) pairs", s.size()));
  Dims off, out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto [b, e] = ranges[i];
    if (b < 0 || e > s[i] || b > e) {
      throw TensorError(
          fmt::format("shrink ({}, {}) is out of bounds for axis {} of size {}", b, e, i, s[i]));
    }
    off.push_back(b);
    out.push_back(e - b);
  }
  return with(uop_.shrink(to_shape(off), to_shape(out)));
}

Tensor Tensor::flip(std::vector<int> axes) const {
  std::vector<bool> f(ndim(), false);
  for (int a : axes) {
    const auto k = static_cast<size_t>(axis(a));
    if (f[k])  // flipping twice would silently undo it
      throw TensorError(fmt::format("flip: axis {} appears more than once", a));
    f[k] = true;
  }
  return with(uop_.flip(f));
}

// ---- reduce
// ----------------------------------------------------------------------------------------------

Tensor Tensor::reduce(Op op, std::vector<int> axes, bool keepdim, std::string_view what) const {
  const Dims s = shape();
  if (what.empty()) what = op == Op::Add ? "sum" : op == Op::Mul ? "prod" : "max";
  if (axes.empty()) {
    axes.resize(s.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  std::vector<bool> reduced(s.size(), false);
  for (int& a : axes) {
    const size_t k = static_cast<size_t>(axis(a));
    if (reduced[k]) throw TensorError(fmt::format("{}: axis {} appears more than once", what, a));
    reduced[k] = true;
  }
  std::vector<int64_t> reduced_axes;
  for (size_t i = 0; i < s.size(); ++i)
    if (reduced[i]) reduced_axes.push_back(static_cast<int64_t>(i));
  const DType acc = op == Op::Add ? sum_acc_dtype(dtype()) : dtype();
  const Tensor src = cast(acc);
  return src.with(src.uop_.reduce(op, reduced_axes, keepdim));
}

// How many elements a reduction over `axes` (all when empty) combines into each output.
int64_t Tensor::reduced_count(const std::vector<int>& axes) const {
  const Dims s = shape();
  if (axes.empty()) return numel();
  int64_t n = 1;
  for (int a : axes) n *= s[static_cast<size_t>(axis(a))];  // within numel(): no overflow
  return n;
}

// Over no elements the mean is 0/0, NaN (as torch, numpy and tinygrad give), not 0.
Tensor Tensor::mean(std::vector<int> axes, bool keepdim) const {
  const Tensor s = sum(axes, keepdim);
  return s.cast(least_upper_float(s.dtype())) * (1.0 / static_cast<double>(reduced_count(axes)));
}

// tinygrad's dot: a 1-d operand is a vector (its axis is dropped from the result), the last two
// axes of an n-d operand are its matrices, and the axes before them broadcast as batch axes.
// The operands broadcast to (..., m, n, k) (w's matrices transposed) and are summed over k.
Tensor Tensor::matmul(const Tensor& o) const {
  const Dims a = shape(), b = o.shape();
  const size_t n1 = a.size(), n2 = b.size();
  if (n1 == 0 || n2 == 0)
    throw TensorError(fmt::format("matmul of {} and {}: both operands need at least one axis",
                                  dims_repr(a), dims_repr(b)));
  const size_t wk = std::min<size_t>(n2, 2);  // w's reduced axis, counted from its end
  if (a.back() != b[n2 - wk]) {
    throw TensorError(fmt::format("matmul shapes {} and {} do not align ({} != {})", dims_repr(a),
                                  dims_repr(b), a.back(), b[n2 - wk]));
  }
  const size_t ones =
      std::min<size_t>({n1 - 1, n2 - 1, 1});  // a size-1 axis for the other's n or m
  Dims xs(a.begin(), a.end() - 1), ws(b.begin(), b.end() - static_cast<std::ptrdiff_t>(wk));
  xs.insert(xs.end(), ones, 1);
  xs.push_back(a.back());
  ws.insert(ws.end(), ones, 1);
  ws.insert(ws.end(), b.end() - static_cast<std::ptrdiff_t>(wk), b.end());
  const Tensor x = reshape(xs), w = o.reshape(ws).transpose(-1, -static_cast<int>(wk));
  return (x * w).sum({-1}).cast(least_upper_dtype(dtype(), o.dtype()));
}

Tensor Tensor::contiguous() const { return with(UOp::make(Op::Contiguous, dtype(), {uop_})); }
Tensor Tensor::detach() const { return with(UOp::make(Op::Detach, dtype(), {uop_})); }
Tensor Tensor::contiguous_backward() const {
  return with(UOp::make(Op::ContiguousBackward, dtype(), {uop_}));
}
std::string Tensor::device() const {
  const Arg d = uop_.device();
  if (!d.is_tuple()) return d.is_string() ? d.as_string() : default_device();
  std::string out = "(";
  for (size_t k = 0; k < d.items().size(); ++k)
    out += fmt::format("{}'{}'", k ? ", " : "", d.items()[k].as_string());
  return out + ")";
}

std::vector<std::string> Tensor::devices() const {
  const Arg d = uop_.device();
  if (!d.is_tuple()) return {device()};
  std::vector<std::string> out;
  for (const Arg& x : d.items()) out.push_back(x.as_string());
  return out;
}

std::optional<int> Tensor::shard_axis() const {
  if (!uop_.device().is_tuple()) return std::nullopt;
  const UOp top = multi_normalized(uop_);
  if (top.op() != Op::Unshard) return std::nullopt;
  return static_cast<int>(top.arg().items()[0].as_int());
}

Tensor Tensor::shard(const std::vector<std::string>& devices, std::optional<int> axis) const {
  if (uop_.device().is_tuple()) throw TensorError("can't shard a multi-device tensor");
  if (devices.empty()) throw TensorError("shard: no devices given");
  if (devices.size() == 1) return to(devices[0]);
  std::vector<Arg> names;
  for (const std::string& d : devices) names.push_back(Arg::string(canonical_device(d)));
  const UOp copied = UOp::make(Op::Copy, dtype(), {uop_}, Arg::tuple(names));
  if (!axis) return with(copied);
  const Dims s = shape();
  const int ax = this->axis(*axis);
  const auto n = static_cast<int64_t>(devices.size());
  if (s[static_cast<size_t>(ax)] % n != 0)
    throw TensorError(fmt::format("multi axis uneven: self.shape[axis]={} axis={} dcount={}",
                                  s[static_cast<size_t>(ax)], ax, n));
  // device r's block: r times the block's size along the axis (tinygrad's DEVICE range)
  const UOp r = UOp::range(UOp::cint(n), -1, AxisType::Device);
  const int64_t block = s[static_cast<size_t>(ax)] / n;
  Shape offsets, sizes = to_shape(s);
  for (size_t i = 0; i < s.size(); ++i) offsets.push_back(SInt(0));
  offsets[static_cast<size_t>(ax)] = SInt(r * UOp::cint(block));
  sizes[static_cast<size_t>(ax)] = SInt(block);
  const UOp part = copied.shrink(offsets, sizes);
  return with(UOp::make(Op::Unshard, dtype(), {part, r}, Arg::tuple({Arg::integer(ax)})));
}

Tensor Tensor::shard_like(const Tensor& y) const {
  const std::vector<std::string> devs = y.devices();
  if (devs.size() == 1) return to(devs[0]);
  if (devices() == devs && shard_axis() == y.shard_axis()) return *this;
  return shard(devs, y.shard_axis());
}

Tensor Tensor::to(const std::string& device) const {
  const std::string target = canonical_device(device);
  if (target == this->device()) return *this;
  Tensor out = with(UOp::make(Op::Copy, dtype(), {uop_}, Arg::string(target)));
  if (grad_) out.grad_ = std::make_shared<Tensor>(grad_->to(target));
  return out;
}

// Contiguous is always a kernel boundary with its own output buffer, so it is the copy; the
// separate name states the guarantee that contiguous() alone does not promise.
Tensor Tensor::clone() const { return contiguous(); }

// ---- more creation
// ---------------------------------------------------------------------------------------

Tensor Tensor::linspace(double start, double stop, int64_t steps, DType dtype) {
  if (steps < 0) throw TensorError("linspace needs steps >= 0");
  check_shape({steps}, dtype, "linspace");
  std::vector<double> v = host_values<double>(steps, "linspace");
  for (int64_t i = 0; i < steps; ++i) {
    v[static_cast<size_t>(i)] = steps == 1 ? start
                                           : start + (stop - start) * static_cast<double>(i) /
                                                         static_cast<double>(steps - 1);
  }
  return from_vector(v, {steps}, dtype);
}

Tensor Tensor::rand(Dims shape, uint64_t seed, DType dtype) {
  check_shape(shape, dtype, "rand");
  const int64_t n = product(shape);
  std::vector<double> v = host_values<double>(n, "rand");
  for (int64_t i = 0; i < n; i += 2) {
    // counter i, key seed (ir/alu.h): the two words are the result's low and high halves
    const uint64_t bits = threefry2x32(static_cast<uint64_t>(i), seed);
    const auto a = static_cast<uint32_t>(bits), b = static_cast<uint32_t>(bits >> 32);
    // 24 random mantissa bits: a uniform float in [0, 1)
    v[static_cast<size_t>(i)] = static_cast<double>(a >> 8) / 16777216.0;
    if (i + 1 < n) v[static_cast<size_t>(i + 1)] = static_cast<double>(b >> 8) / 16777216.0;
  }
  return from_vector(v, shape, dtype);
}

Tensor Tensor::uniform(Dims shape, double low, double high, DType dtype) {
  return (rand(std::move(shape), next_seed()) * (high - low) + low).cast(dtype);
}

Tensor Tensor::glorot_uniform(Dims shape, DType dtype) {
  if (shape.empty()) throw TensorError("glorot_uniform needs a shape of at least one axis");
  double fan = static_cast<double>(shape[0]);
  double rest = 1;
  for (size_t i = 1; i < shape.size(); ++i) rest *= static_cast<double>(shape[i]);
  return uniform(std::move(shape), -1, 1, dtype) * std::sqrt(6.0 / (fan + rest));
}

Tensor Tensor::randn(Dims shape, uint64_t seed, DType dtype) {
  // Box-Muller on two uniform tensors
  const Tensor u1 = rand(shape, seed, dtypes::float32),
               u2 = rand(shape, seed ^ 0x9E3779B97F4A7C15ULL, dtypes::float32);
  return ((-((-u1) + 1.0).log() * 2.0).sqrt() * (u2 * 6.283185307179586).cos()).cast(dtype);
}

// ---- more elementwise
// ------------------------------------------------------------------------------------

Tensor Tensor::gelu() const {
  return *this * 0.5 * ((*this + *this * *this * *this * 0.044715) * 0.7978845608028654).tanh() +
         *this * 0.5;
}

Tensor Tensor::pow(const Tensor& e) const {
  const Tensor x = cast(least_upper_float(dtype()));
  return (x.log2() * e.cast(x.dtype())).exp2();
}

Tensor Tensor::bitwise(Op op, const Tensor& o) const {
  if (dtype().is_float() || o.dtype().is_float())
    throw TensorError(std::string(op_name(op)) + " needs integer or bool tensors");
  return binary(op, o);
}

Tensor Tensor::bitcast(DType d) const {
  if (d.itemsize() != dtype().itemsize()) {
    throw TensorError(
        fmt::format("bitcast from {} to {} changes the item size", dtype().repr(), d.repr()));
  }
  return with(UOp::make(Op::Bitcast, d, {uop_}));
}

// ---- more movement
// ---------------------------------------------------------------------------------------

Tensor Tensor::unsqueeze(int a) const {
  const int n = static_cast<int>(ndim());
  if (a < 0) a += n + 1;
  if (a < 0 || a > n) throw TensorError(fmt::format("unsqueeze axis {} out of range", a));
  Dims s = shape();
  s.insert(s.begin() + a, 1);
  return reshape(s);
}

Tensor Tensor::slice(std::vector<std::tuple<int64_t, int64_t, int64_t>> sl) const {
  const Dims s = shape();
  if (sl.size() > s.size()) throw TensorError("too many slice axes");
  Tensor t = *this;
  for (size_t k = 0; k < sl.size(); ++k) {
    auto [start, stop, step] = sl[k];
    const int64_t n = s[k];
    if (step == 0) throw TensorError("slice step must not be zero");
    auto norm = [&](int64_t v, int64_t lo, int64_t hi) {
      return std::clamp(v < 0 ? v + n : v, lo, hi);
    };
    std::vector<std::pair<int64_t, int64_t>> shr(t.ndim());
    for (size_t i = 0; i < t.ndim(); ++i) shr[i] = {0, t.shape()[i]};
    if (step > 0) {
      start = norm(start, 0, n);
      stop = std::max(norm(stop, 0, n), start);
    } else {  // a negative step walks from start down to stop (exclusive): flip, then step forward
      const int64_t hi = norm(start, -1, n - 1), lo = stop < -n ? -1 : norm(stop, -1, n - 1);
      const int64_t len = std::max<int64_t>(0, hi - lo);
      t = t.flip({static_cast<int>(k)});
      start = n - 1 - hi;
      stop = start + len;
      step = step == INT64_MIN ? INT64_MAX : -step;
    }
    shr[k] = {start, stop};
    t = t.shrink(shr);
    if (step > 1) {  // keep every step-th element: pad to a multiple, split the axis, take column 0
      const int64_t len = stop - start;
      if (len <= 1) continue;      // no more than one element: the shrink took it
      step = std::min(step, len);  // a longer step keeps the first element only (no overflow)
      const int64_t count = (len - 1) / step + 1;
      std::vector<std::pair<int64_t, int64_t>> pad(t.ndim(), {0, 0});
      pad[k] = {0, count * step - len};
      t = t.pad(pad);
      Dims split = t.shape();
      split[k] = count;
      split.insert(split.begin() + static_cast<long>(k) + 1, step);
      t = t.reshape(split);
      std::vector<std::pair<int64_t, int64_t>> take;
      for (int64_t d : split) take.emplace_back(0, d);
      take[k + 1] = {0, 1};
      Dims merged = split;
      merged.erase(merged.begin() + static_cast<long>(k) + 1);
      t = t.shrink(take).reshape(merged);
    }
  }
  return t;
}

Tensor Tensor::cat(const std::vector<Tensor>& ts, int axis) {
  if (ts.empty()) throw TensorError("cat needs at least one tensor");
  const int a = ts[0].axis(axis);
  const Dims base = ts[0].shape();
  int64_t total = 0;
  for (const Tensor& t : ts) {
    Dims s = t.shape();
    if (s.size() != base.size()) throw TensorError("cat: tensors have different ranks");
    for (size_t i = 0; i < s.size(); ++i)
      if (static_cast<int>(i) != a && s[i] != base[i])
        throw TensorError(fmt::format("cat: shapes {} and {} differ off axis {}", dims_repr(base),
                                      dims_repr(s), a));
    total = add_sizes(total, s[static_cast<size_t>(a)], "cat");
  }
  // every piece padded with zeros to the full length, then summed
  std::optional<Tensor> out;
  int64_t offset = 0;
  for (const Tensor& t : ts) {
    std::vector<std::pair<int64_t, int64_t>> pad(base.size(), {0, 0});
    const int64_t len = t.shape()[static_cast<size_t>(a)];
    pad[static_cast<size_t>(a)] = {offset, total - offset - len};
    offset += len;
    Tensor p = t.pad(pad);
    out = out ? *out + p : p;
  }
  return *out;
}

Tensor Tensor::stack(const std::vector<Tensor>& ts, int axis) {
  std::vector<Tensor> u;
  for (const Tensor& t : ts) u.push_back(t.unsqueeze(axis));
  return cat(u, axis);
}

// ---- more reduce
// ------------------------------------------------------------------------------------------

Tensor Tensor::var(std::vector<int> axes, bool keepdim, int correction) const {
  const Tensor m = mean(axes, true);
  const Tensor d = cast(least_upper_float(dtype())) - m;
  const Tensor ss = (d * d).sum(axes, keepdim);
  // no more elements than `correction`: a division by zero (NaN or inf), not by 1
  const int64_t n = reduced_count(axes);
  return ss * (1.0 / static_cast<double>(std::max<int64_t>(n - correction, 0)));
}

Tensor Tensor::argmax(int ax, bool keepdim) const {
  const int a = axis(ax);
  const int64_t n = shape()[static_cast<size_t>(a)];
  // over nothing there is no index to give (tinygrad returns INT32_MIN)
  if (n == 0)
    throw TensorError(fmt::format("argmax over axis {} of size 0 (shape {}): there is no index", a,
                                  dims_repr(shape())));
  // the result is int32, as tinygrad's: an index past INT32_MAX has no value to give
  if (n > std::numeric_limits<int32_t>::max())
    throw TensorError(fmt::format(
        "argmax over axis {} of size {}: its indices do not fit the int32 result (at most {})", a,
        n, std::numeric_limits<int32_t>::max()));
  const Tensor is_max = eq(reduce(Op::Max, {a}, true, "argmax")).cast(dtypes::int32);
  Dims wshape(ndim(), 1);
  wshape[static_cast<size_t>(a)] = n;
  // the first maximum gets the largest weight n - i
  const Tensor weights =
      (Tensor::full({n}, static_cast<double>(n), dtypes::int32) - arange(n)).reshape(wshape);
  const Tensor best = (is_max * weights).max({a}, keepdim);
  return Tensor::full(best.shape(), static_cast<double>(n), dtypes::int32) - best;
}

Tensor Tensor::softmax(int ax) const {
  const int a = axis(ax);
  const Tensor e = (*this - max({a}, true)).exp();
  return e / e.sum({a}, true);
}

Tensor Tensor::log_softmax(int ax) const {
  const int a = axis(ax);
  const Tensor shifted = *this - max({a}, true);
  return shifted - shifted.exp().sum({a}, true).log();
}

// ---- assignment ------------------------------------------------------------------------------

// A buffer (or assignment chain over one) seen through shrinks, permutes, flips and reshapes:
// each element of the view is one element of the buffer, so a store into it is well defined.
// A buffer seen through an expand (elements repeated) or a pad (elements that are no buffer
// element) cannot be written: that raises, as tinygrad refuses it, rather than writing a copy.
bool Tensor::writable_view(UOp u, std::string_view what) {
  Op blocked = Op::Noop;
  for (;;) {
    if (u.op() == Op::After) {
      u = u.src(0);
    } else if (is_buffer_view(u)) {
      if (blocked != Op::Noop)
        throw TensorError(fmt::format(
            "{}: the target is a view of a buffer through {}, whose elements are not distinct "
            "elements of the buffer; assign to the buffer, or to a contiguous() copy",
            what, op_name(blocked)));
      return true;
    } else if (u.op() == Op::Shrink || u.op() == Op::Permute || u.op() == Op::Flip ||
               u.op() == Op::Reshape) {
      u = u.src(0);
    } else if (u.op() == Op::Expand || u.op() == Op::Pad) {
      blocked = u.op();
      u = u.src(0);
    } else {
      return false;
    }
  }
}

Tensor& Tensor::setitem(std::vector<std::tuple<int64_t, int64_t, int64_t>> slices,
                        const Tensor& value) {
  if (!writable_view(uop_, "setitem")) realize();
  Tensor view = with(uop_).slice(std::move(slices));
  Tensor v = value.dtype() == dtype() ? value : value.cast(dtype());
  if (v.shape() != view.shape()) {
    Dims vs = v.shape();  // broadcast: leading 1s, then size-1 axes expand
    if (vs.size() > view.ndim())
      throw TensorError(fmt::format("setitem: a value of shape {} does not fit a slice of {}",
                                    dims_repr(vs), dims_repr(view.shape())));
    vs.insert(vs.begin(), view.ndim() - vs.size(), 1);
    v = v.reshape(vs).expand(view.shape());
  }
  write(view.uop_, v);
  return *this;
}

Tensor& Tensor::assign(const Tensor& value) {
  if (value.shape() != shape())
    throw TensorError(fmt::format("assign shape mismatch: {} into {}", dims_repr(value.shape()),
                                  dims_repr(shape())));
  if (value.dtype() != dtype())
    throw TensorError(
        fmt::format("assign dtype mismatch: {} into {}", value.dtype().repr(), dtype().repr()));
  if (uop_.device().is_tuple() || value.uop_.device().is_tuple()) return assign_parts(value);
  // (a value of constants only has no device: it is computed where it is stored)
  if (const Arg d = value.uop_.device(); d.is_string() && d.as_string() != device())
    throw TensorError(
        fmt::format("assign device mismatch: a value on {} into {}", d.as_string(), device()));
  // a buffer, or a view of one (written through), is the target; a computed tensor gets its own
  // buffer first
  if (!writable_view(uop_, "assign")) realize();
  write(uop_, value);
  return *this;
}

// tinygrad's store_after_multi: the target's buffers (realized first) each store their device's
// part of the value, split as the target is (a value on one device or none is split so first).
Tensor& Tensor::assign_parts(const Tensor& value) {
  if (!uop_.device().is_tuple())
    throw TensorError(
        fmt::format("assign device mismatch: a value on {} into {}", value.device(), device()));
  const Tensor v = value.uop_.device().is_tuple() ? value : value.shard_like(*this);
  if (v.devices() != devices() || v.shard_axis() != shard_axis())
    throw TensorError(
        fmt::format("assign sharding mismatch: a value on {} split along {} into {} split along {}",
                    v.device(), v.shard_axis() ? std::to_string(*v.shard_axis()) : "none", device(),
                    shard_axis() ? std::to_string(*shard_axis()) : "none"));
  realize();  // its buffers: MSTACK(one view per device), under UNSHARD when split
  const UOp stacked = uop_.op() == Op::Unshard ? uop_.src(0) : uop_;
  UOp parts = multi_normalized(v.uop_);
  if (parts.op() == Op::Unshard) parts = parts.src(0);
  std::vector<UOp> states;
  StorageList deps;
  for (size_t k = 0; k < stacked.nsrc(); ++k) {
    const UOp& view = stacked.src(k);
    StorageList own;
    for (const auto& s : deps_)
      if (s->id == static_cast<int64_t>(storage_root(view).arg().field("slot").as_int())) own = {s};
    Tensor target(view, own);
    target.assign(Tensor(
        UOp::make(Op::MSelect, dtype(), {parts}, Arg::integer(static_cast<int64_t>(k))), v.deps_));
    states.push_back(target.uop_);
    deps = StorageList::merge(deps, target.deps_);
  }
  uop_ = stacked_parts(states, uop_.op() == Op::Unshard ? uop_ : UOp());
  deps_ = deps;
  computed_by_ = UOp();
  computed_by_storages_.clear();
  return *this;
}

void Tensor::write(const UOp& target, const Tensor& value) {
  // STORE into the current state (so assignments to one buffer apply in order), then AFTER: the
  // buffer, readable once the store has run. Each assignment is its own event: the arg keeps two
  // equal-looking assignments (a training step repeated) from hash-consing into one node that
  // would count as already executed.
  const UOp store =
      UOp::make(Op::Store, dtypes::void_, {target, value.uop_}, Arg::integer(next_effect_id()));
  // The state written: the target when it holds the whole buffer (a gradient then flows through
  // the AFTER to the stored value), else the buffer state under the view. Every live tensor whose
  // movement ops reach that state reads it after the store; one that reaches only the buffer
  // state under it (another shape of the whole buffer) reads that after the store. A computed
  // tensor made before keeps reading the old contents (or is refused once they are overwritten).
  const UOp state = view_base(target);
  UOp under = state;
  while (under.op() != Op::After && groups::movement().contains(under.op())) under = under.src(0);
  const StorageList value_deps = value.deps_;  // `value` may be one of the tensors rebased
  rebase_live(state, state.after({store}), value_deps);
  if (under != state) rebase_live(under, under.after({store}), value_deps);
}

void Tensor::rebase_live(const UOp& from, const UOp& to, const StorageList& add_deps) {
  LiveTensors& live = LiveTensors::get();
  std::lock_guard lock(live.mutex);
  for (Tensor* t = live.head; t; t = t->live_next_) {
    if (!t->uop_) continue;  // moved from
    UOp moved = rebase_view(t->uop_, from, to);
    if (!moved) continue;
    if (live.journal) live.journal->entries_.push_back({t, t->uop_, t->deps_});
    t->uop_ = moved;
    if (!add_deps.empty()) t->deps_ = StorageList::merge(t->deps_, add_deps);
  }
}

// ---- gradients
// -------------------------------------------------------------------------------------

std::vector<Tensor> Tensor::gradient(const std::vector<Tensor>& targets, const Tensor* seed) const {
  if (!dtype().is_float()) {
    throw TensorError("gradient of a non-float tensor (" + dtype().repr() + ")");
  }
  if (!seed && numel() != 1) {
    throw TensorError("gradient of a non-scalar output " + dims_repr(shape()) +
                      " needs a seed gradient");
  }
  if (seed && seed->shape() != shape()) {
    throw TensorError("the seed gradient's shape " + dims_repr(seed->shape()) +
                      " is not the output's " + dims_repr(shape()));
  }
  // a realized tensor is differentiated through the graph it was computed by: a target is found
  // as its buffer, or else as that graph
  std::unordered_set<UOp> wanted;
  for (const Tensor& t : targets) {
    wanted.insert(t.uop_);
    wanted.insert(t.differentiable_uop());
  }
  std::vector<std::shared_ptr<Storage>> storages = deps_.items();
  auto keep = [&](const std::vector<std::shared_ptr<Storage>>& more) {
    add_storages(storages, more);
  };
  keep(computed_by_storages_);
  for (const Tensor& t : targets) {
    keep(t.deps_);
    keep(t.computed_by_storages_);
  }
  if (seed) keep(seed->deps_);
  const std::unordered_map<UOp, UOp> grads = compute_gradient(
      differentiable_uop(), seed ? seed->cast(dtype()).uop_ : full(shape(), 1.0, dtype()).uop_,
      wanted, storages);
  const StorageList reads(storages);
  std::vector<Tensor> out;
  for (const Tensor& t : targets) {
    // found as its buffer, as the graph it was computed by, or both (the sum)
    UOp g;
    for (const UOp& form : {t.uop_, t.differentiable_uop()}) {
      auto it = grads.find(form);
      if (it == grads.end() || (g && form == t.uop_)) continue;
      g = g ? g + it->second : it->second;
    }
    out.push_back(g ? Tensor(g, reads).cast(t.dtype()) : zeros(t.shape(), t.dtype()));
  }
  return out;
}

void Tensor::backward(const std::vector<Tensor*>& params, const Tensor* seed) const {
  std::vector<Tensor> targets;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i]) throw TensorError(fmt::format("backward: parameter {} is a null pointer", i));
    targets.push_back(*params[i]);
  }
  // Lazy, as tinygrad's: the gradients are graphs until something realizes them. An optimizer
  // step then runs forward, backward and update as one schedule; realizing the gradients here
  // would make a second schedule recompute the forward values the step also needs (the loss,
  // BatchNorm's batch statistics).
  std::vector<Tensor> g = gradient(targets, seed);
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i]->grad_) {
      *params[i]->grad_ = *params[i]->grad_ + g[i];  // the same object, updated
    } else {
      params[i]->grad_ = std::make_shared<Tensor>(g[i]);
    }
  }
}

}  // namespace tinyrw

// The Tensor front end: a lazy tensor that builds a UOp graph; `realize` lowers it (through the
// rules of rules/rangeify.rw) to kernels and runs them on a device.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/uop.h"
#include "runtime/storage.h"

namespace tinyrw {

// The buffers a graph reads, each once, kept alive with it. Merging two lists is O(1) (a node
// over both, or one of them when the other adds nothing) and listing them walks the merges
// once, so a graph built op by op costs O(ops) however many buffers it reads. Read like a
// vector; its nodes are released without recursion. Listing rewrites the list's node in place
// (it becomes a leaf), so like UOps a list is used from one thread at a time.
class StorageList {
 public:
  using Items = std::vector<std::shared_ptr<Storage>>;
  StorageList() = default;
  StorageList(Items items);  // NOLINT: implicit, a vector is a list
  StorageList(std::initializer_list<std::shared_ptr<Storage>> items) : StorageList(Items(items)) {}
  static StorageList merge(const StorageList& a, const StorageList& b);

  const Items& items() const;                        // listed once per list, then kept
  operator const Items&() const { return items(); }  // NOLINT
  size_t size() const { return items().size(); }
  bool empty() const { return !node_; }
  const std::shared_ptr<Storage>& operator[](size_t i) const { return items()[i]; }
  const std::shared_ptr<Storage>& at(size_t i) const { return items().at(i); }
  Items::const_iterator begin() const { return items().begin(); }
  Items::const_iterator end() const { return items().end(); }

  struct Node;

 private:
  std::shared_ptr<Node> node_;
};

// The deepest chain of elementwise and movement ops fused into one kernel. A deeper chain is cut
// (rules/rangeify.rw's realize map, depth_limit): the op at this depth is realized into a buffer of
// its own, and the rest reads it; a broadcast (EXPAND) at this depth is not, its source is. LLVM's
// time on one kernel grows faster than linearly with its length (index math of 10,000
// reshape/transpose levels took 220 s in one kernel), so a long chain compiles as several short
// kernels instead.
inline constexpr int kMaxFusedDepth = 256;

// One kernel of a schedule (Tensor::schedule): the kernel CALL of the kernel graph it runs
// (schedule/rangeify.h: CALL(ast, buffers...), a new buffer with a negative slot) and its kernel
// AST (SINK[KernelInfo] over PARAMs, as realize() compiles it; a custom kernel's own body).
struct ScheduleItem {
  UOp node;
  UOp ast;
};

// Options of Tensor::conv2d and the pools (tensor/composite.cpp). Spatial sizes are the trailing
// axes, as many as the kernel has; one value stands for all of them. `padding` takes tinygrad's
// three forms: one value for every side, one per spatial axis (both sides), or two per axis
// listed from the last axis (left, right, top, bottom, ...).
struct ConvOptions {
  int64_t groups = 1;
  Dims stride{1}, dilation{1}, padding{0};
};
struct PoolOptions {
  Dims kernel_size{2, 2};
  Dims stride{};  // empty: the kernel size
  Dims dilation{1}, padding{0};
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg_pool2d only
};

class Tensor {
 public:
  // Every Tensor is listed while it lives, so that an assignment is seen by every tensor over the
  // buffer it writes (tinygrad replaces the graph of every live tensor that holds the buffer).
  Tensor(const Tensor& o);
  Tensor(Tensor&& o) noexcept;
  Tensor& operator=(const Tensor& o);
  Tensor& operator=(Tensor&& o) noexcept;
  ~Tensor();

  // ---- creation
  // Every value must fit `dtype` (an integer dtype's range; a finite value must stay finite in a
  // float dtype): a value that does not raises a TensorError. T is float, double, bool or an
  // 8/16/32/64-bit signed or unsigned integer.
  template <class T>
  static Tensor from_vector(const std::vector<T>& data, Dims shape, DType dtype);
  static Tensor from_vector(const std::vector<float>& data, Dims shape) {
    return from_vector(data, std::move(shape), dtypes::float32);
  }
  // `value` must fit `dtype` as for from_vector (a fraction is truncated toward zero for ints).
  static Tensor full(Dims shape, double value, DType dtype = dtypes::float32);
  static Tensor zeros(Dims shape, DType dtype = dtypes::float32) {
    return full(std::move(shape), 0, dtype);
  }
  static Tensor ones(Dims shape, DType dtype = dtypes::float32) {
    return full(std::move(shape), 1, dtype);
  }
  static Tensor empty(Dims shape, DType dtype = dtypes::float32);
  static Tensor arange(int64_t stop) { return arange(0, stop, 1); }
  static Tensor arange(int64_t start, int64_t stop, int64_t step = 1, DType dtype = dtypes::int32);
  static Tensor eye(int64_t n, DType dtype = dtypes::float32);
  static Tensor linspace(double start, double stop, int64_t steps, DType dtype = dtypes::float32);
  // Uniform [0, 1) and standard normal values from threefry-2x32 keyed by `seed`.
  static Tensor rand(Dims shape, uint64_t seed = 0, DType dtype = dtypes::float32);
  static Tensor randn(Dims shape, uint64_t seed = 0, DType dtype = dtypes::float32);
  // Uniform [low, high) (tinygrad's uniform) and glorot_uniform (uniform in +-sqrt(6 / (fan_in +
  // fan_out))), seeded from the global seed (manual_seed) as dropout is.
  static Tensor uniform(Dims shape, double low = 0, double high = 1, DType dtype = dtypes::float32);
  static Tensor glorot_uniform(Dims shape, DType dtype = dtypes::float32);
  // A tensor over a copy of raw elements in the dtype's representation (little-endian,
  // row-major; bools one byte each, any nonzero byte true): nbytes must be numel * itemsize.
  static Tensor from_bytes(const uint8_t* data, size_t nbytes, Dims shape, DType dtype);

  // A tensor over a graph built by hand from UOps, reading the buffers of `reads`. Each STORE and
  // kernel CALL in it without an effect number gets a new one, as assign() and custom_kernel()
  // give theirs: one unnumbered node wrapped by two from_uop calls is two effects.
  static Tensor from_uop(UOp u, const std::vector<Tensor>& reads = {});
  // The same with the buffers given directly, and the graph's effects numbered as they are (the
  // front end's own graphs: function outputs, custom kernels, gradients).
  static Tensor over_storages(UOp u, std::vector<std::shared_ptr<Storage>> storages) {
    return Tensor(std::move(u), StorageList(std::move(storages)));
  }

  // ---- properties
  const UOp& uop() const { return uop_; }
  const std::vector<std::shared_ptr<Storage>>& storages() const { return deps_.items(); }
  Dims shape() const;
  DType dtype() const { return uop_.dtype(); }
  size_t ndim() const { return shape().size(); }
  int64_t numel() const;

  // ---- elementwise (broadcasting, dtype promotion)
  // Any ALU op on sources of one shape and dtype (comparisons give bool); the building block of
  // the operators below, and of the spec tests.
  static Tensor alu(Op op, const std::vector<Tensor>& srcs);
  Tensor operator+(const Tensor& o) const { return binary(Op::Add, o); }
  Tensor operator-(const Tensor& o) const;
  Tensor operator*(const Tensor& o) const { return binary(Op::Mul, o); }
  Tensor operator/(const Tensor& o) const;
  Tensor operator+(double v) const { return *this + scalar_like(v); }
  Tensor operator-(double v) const { return *this - scalar_like(v); }
  Tensor operator*(double v) const { return *this * scalar_like(v); }
  Tensor operator/(double v) const { return *this / scalar_like(v); }
  Tensor operator-() const;
  Tensor maximum(const Tensor& o) const { return binary(Op::Max, o); }
  Tensor minimum(const Tensor& o) const { return -((-*this).maximum(-o)); }
  Tensor lt(const Tensor& o) const { return binary(Op::CmpLt, o); }
  Tensor le(const Tensor& o) const { return gt(o).logical_not(); }
  Tensor ge(const Tensor& o) const { return lt(o).logical_not(); }
  Tensor bitwise_and(const Tensor& o) const { return bitwise(Op::And, o); }
  Tensor bitwise_or(const Tensor& o) const { return bitwise(Op::Or, o); }
  Tensor bitwise_xor(const Tensor& o) const { return bitwise(Op::Xor, o); }
  Tensor logical_and(const Tensor& o) const {
    return cast(dtypes::bool_).bitwise_and(o.cast(dtypes::bool_));
  }
  Tensor logical_or(const Tensor& o) const {
    return cast(dtypes::bool_).bitwise_or(o.cast(dtypes::bool_));
  }
  Tensor gt(const Tensor& o) const { return o.lt(*this); }
  Tensor ne(const Tensor& o) const { return binary(Op::CmpNe, o); }
  Tensor eq(const Tensor& o) const { return ne(o).logical_not(); }
  Tensor logical_not() const;
  Tensor where(const Tensor& a, const Tensor& b) const;
  Tensor relu() const { return maximum(scalar_like(0)); }
  Tensor exp2() const { return unary_float(Op::Exp2); }
  Tensor log2() const { return unary_float(Op::Log2); }
  Tensor sqrt() const { return unary_float(Op::Sqrt); }
  Tensor sin() const { return unary_float(Op::Sin); }
  Tensor reciprocal() const { return unary_float(Op::Reciprocal); }
  Tensor exp() const { return (*this * (1.0 / 0.6931471805599453)).exp2(); }
  Tensor log() const { return log2() * 0.6931471805599453; }
  Tensor sigmoid() const { return ((-*this).exp() + 1.0).reciprocal(); }
  Tensor cos() const { return (*this + 1.5707963267948966).sin(); }
  Tensor tanh() const { return (*this * 2.0).sigmoid() * 2.0 - 1.0; }
  Tensor gelu() const;
  Tensor rsqrt() const { return sqrt().reciprocal(); }
  Tensor square() const { return *this * *this; }
  Tensor pow(const Tensor& e) const;  // exp2(e * log2(x)); negative bases give nan
  Tensor bitcast(DType d) const;
  Tensor cast(DType d) const;

  // ---- movement
  Tensor reshape(Dims shape) const;  // one dim may be -1
  Tensor permute(std::vector<int> order) const;
  Tensor transpose(int a = -2, int b = -1) const;
  Tensor expand(Dims shape) const;
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> padding) const;  // zero padding
  Tensor shrink(std::vector<std::pair<int64_t, int64_t>> ranges) const;
  Tensor flip(std::vector<int> axes) const;
  // Python-style slicing per axis: (start, stop, step) with negative steps; stop clamps.
  Tensor slice(std::vector<std::tuple<int64_t, int64_t, int64_t>> s) const;
  static Tensor cat(const std::vector<Tensor>& ts, int axis = 0);
  static Tensor stack(const std::vector<Tensor>& ts, int axis = 0);
  Tensor unsqueeze(int axis) const;

  // ---- reduce
  Tensor sum(std::vector<int> axes = {}, bool keepdim = false) const {
    return reduce(Op::Add, std::move(axes), keepdim);
  }
  Tensor max(std::vector<int> axes = {}, bool keepdim = false) const {
    return reduce(Op::Max, std::move(axes), keepdim);
  }
  Tensor min(std::vector<int> axes = {}, bool keepdim = false) const {
    return order_reversed().reduce(Op::Max, std::move(axes), keepdim, "min").order_reversed();
  }
  Tensor prod(std::vector<int> axes = {}, bool keepdim = false) const {
    return reduce(Op::Mul, std::move(axes), keepdim);
  }
  Tensor mean(std::vector<int> axes = {}, bool keepdim = false) const;
  Tensor var(std::vector<int> axes = {}, bool keepdim = false, int correction = 1) const;
  Tensor std(std::vector<int> axes = {}, bool keepdim = false, int correction = 1) const {
    return var(std::move(axes), keepdim, correction).sqrt();
  }
  Tensor argmax(int axis, bool keepdim = false) const;
  Tensor softmax(int axis = -1) const;
  Tensor log_softmax(int axis = -1) const;
  // tinygrad's dot: vectors (1-d), matrices, and batches of matrices whose batch axes broadcast
  Tensor matmul(const Tensor& o) const;

  // ---- composite ops (tensor/composite.cpp): tinygrad's names and semantics, built from the ops
  // above, so their gradients come from those ops' rules
  Tensor abs() const;
  Tensor sign() const;  // -1, 0 or 1 in this tensor's dtype
  // Clamps to [lo, hi]; either bound may be absent, not both.
  Tensor clip(std::optional<double> lo, std::optional<double> hi) const;
  // Pads with `value` rather than zero; a negative amount removes elements (tinygrad's pad).
  Tensor pad(std::vector<std::pair<int64_t, int64_t>> padding, double value) const;
  Tensor repeat(Dims repeats) const;  // tiles the tensor `repeats[i]` times along axis i
  // The upper (lower) triangle of the last two axes from `diagonal` on, zeros elsewhere.
  Tensor triu(int64_t diagonal = 0) const;
  Tensor tril(int64_t diagonal = 0) const;

  // x (N, Cin, *spatial) and weight (Cout, Cin / groups, *kernel); bias (Cout) may be null.
  Tensor conv2d(const Tensor& weight, const Tensor* bias = nullptr, ConvOptions o = {}) const;
  // The transposed convolution (tinygrad's conv_transpose2d): x (N, Cin, *spatial) and weight
  // (Cin, Cout / groups, *kernel); the gradient of conv2d with respect to its input.
  // `output_padding` (one value, or one per spatial axis) adds rows after each spatial axis.
  Tensor conv_transpose2d(const Tensor& weight, const Tensor* bias = nullptr, ConvOptions o = {},
                          Dims output_padding = {0}) const;
  Tensor max_pool2d(PoolOptions o = {}) const;
  // The maxima and, for each, its flat index within the spatial axes of the input (the first
  // maximum of the window).
  std::pair<Tensor, Tensor> max_pool2d_with_indices(PoolOptions o = {}) const;
  Tensor avg_pool2d(PoolOptions o = {}) const;

  // Running sum, product and max along `axis` (sums widen ints as sum() does).
  Tensor cumsum(int axis = 0) const;
  Tensor cumprod(int axis = 0) const;
  // The running maxima and the index (int32) where each was first reached.
  std::pair<Tensor, Tensor> cummax(int axis = 0) const;

  // Integer tensors only: 1 where the last axis (of size num_classes) equals the value (int32).
  Tensor one_hot(int64_t num_classes) const;
  // out[i][j] = this[i][index[i][j]] for dim 1 (and likewise for any dim); index is an integer
  // tensor of this tensor's rank, no larger than it off `dim`.
  Tensor gather(int dim, const Tensor& index) const;
  // this[index] for an integer tensor `index`: the rows of axis 0 it names (negative ones count
  // from the end; one out of range selects zeros), shape index.shape + shape[1:].
  Tensor operator[](const Tensor& index) const;

  // Losses (logits are this tensor; classes on the last axis for the sparse one, on axis 1 -- or
  // 0 for one sample -- for cross_entropy, whose Y is labels or class probabilities).
  enum class Reduction { None, Sum, Mean };
  Tensor sparse_categorical_crossentropy(const Tensor& labels, int64_t ignore_index = -1,
                                         double label_smoothing = 0,
                                         Reduction reduction = Reduction::Mean) const;
  Tensor cross_entropy(const Tensor& y, Reduction reduction = Reduction::Mean,
                       double label_smoothing = 0) const;
  // This tensor holds probabilities.
  Tensor binary_crossentropy(const Tensor& y, Reduction reduction = Reduction::Mean) const;

  // (x - mean) * weight * invstd + bias over `axes` (the channel axis by default); weight and bias
  // may be null.
  Tensor batchnorm(const Tensor* weight, const Tensor* bias, const Tensor& mean,
                   const Tensor& invstd, std::vector<int> axes = {1}) const;
  Tensor layernorm(std::vector<int> axes = {-1}, double eps = 1e-5) const;
  // Zeroes each element with probability p and scales the rest by 1/(1-p), in training only.
  Tensor dropout(double p = 0.5) const;
  // Training mode (tinygrad's Tensor.training): dropout acts only while it is on.
  static bool training();
  static void set_training(bool on);
  // The seed of the next random tensor made without one (dropout's masks).
  static void manual_seed(uint64_t seed);

  // ---- gradients (rules/gradient.rw)
  // d(this)/d(target) for each target (zeros for a target this does not depend on). `this` must be
  // a float tensor; a non-scalar one needs `seed`, the gradient of the output itself.
  std::vector<Tensor> gradient(const std::vector<Tensor>& targets,
                               const Tensor* seed = nullptr) const;
  // Accumulates d(this)/d(param) into each param's grad() (the same object on repeated calls),
  // lazily as tinygrad does: nothing runs until a grad, or a step that reads it, is realized.
  void backward(const std::vector<Tensor*>& params, const Tensor* seed = nullptr) const;
  Tensor* grad() const { return grad_.get(); }
  void clear_grad() { grad_.reset(); }  // tinygrad's `t.grad = None`

  // ---- devices (runtime/device.h: INTERP or CPU, with an optional index, CPU:1)
  // The device whose buffers hold it once realized: its graph's, else (a constant, a value of
  // constants only) the default device; for a tensor on several, their tuple as tinygrad prints
  // it, ('CPU:1', 'CPU:2').
  std::string device() const;
  // The devices it is on: one, or each that holds a part (rules/multi.rw).
  std::vector<std::string> devices() const;
  // The same value on `device` (tinygrad's to): itself when it is there already, else a COPY,
  // realized as a transfer between the two devices' buffers (from several devices: the parts
  // joined); its grad() is copied too.
  Tensor to(const std::string& device) const;
  // Split along `axis` over `devices` (tinygrad's shard): device k holds the k-th block of
  // shape[axis] / n (an axis n does not divide raises), or, without an axis, all of it on each.
  // One device is to(); a tensor of constants only is made on the default device and copied; a
  // tensor already on several devices raises.
  Tensor shard(const std::vector<std::string>& devices, std::optional<int> axis = {}) const;
  // Split as y is (its devices and axis); y on one device: to() it.
  Tensor shard_like(const Tensor& y) const;
  // The axis it is split along over its devices (tinygrad's uop.axis): none on one device or
  // when each device holds all of it. Raises where its graph moves items between shards.
  std::optional<int> shard_axis() const;

  // ---- realization
  Tensor contiguous() const;
  // The value unchanged; its gradient is made contiguous (realized) in the backward pass.
  Tensor contiguous_backward() const;
  // The value unchanged, with no gradient flowing through it.
  Tensor detach() const;
  // A copy in fresh storage once realized: later assignments to this tensor leave it unchanged.
  Tensor clone() const;
  Tensor& realize();
  // Realizes several tensors in one schedule (reads and assignments ordered together).
  static void realize_all(const std::vector<Tensor*>& tensors);
  // The kernels realize_all would run for these tensors, in order, lowered but not run (no
  // memory is allocated or written; the scheduling errors, "cycle" among them, are raised).
  static std::vector<ScheduleItem> schedule(const std::vector<const Tensor*>& tensors);
  // Writes `value` into this tensor's buffer (lazily: STORE then AFTER). Reads made before the
  // assignment see the old contents, reads made after it the new ones; an order that cannot give
  // both raises an error containing "cycle" before anything runs, and a read of contents that an
  // executed assignment has overwritten (a lazy read or a copy made before it) is refused.
  // (On a view of a buffer, such as shrink() or slice() of one, the assignment writes through to
  // that buffer, and every live tensor over the buffer's contents (the buffer's own tensor, other
  // views of it) reads it after the write, as tinygrad's do; a computed read made before still
  // reads the old contents: docs/tinygrad-differences.md.)
  Tensor& assign(const Tensor& value);
  // this[slices] = value: writes value (broadcast and cast to this tensor's dtype) into the
  // slice of this tensor's buffer, which this tensor then reads (tinygrad's __setitem__).
  Tensor& setitem(std::vector<std::tuple<int64_t, int64_t, int64_t>> slices, const Tensor& value);
  template <class T>
  std::vector<T> data();
  std::vector<double> to_doubles();
  // The elements in the dtype's representation, row-major (from_bytes' layout).
  std::vector<uint8_t> to_bytes();
  template <class T>
  T item() {
    if (numel() != 1)
      throw TensorError("item() needs exactly one element, the tensor has " +
                        std::to_string(numel()));
    return data<T>()[0];
  }

 private:
  // Raises a TensorError when u has no valid shape or one beyond kMaxTensorBytes.
  Tensor(UOp u, StorageList deps);
  // Already a buffer that no assignment has touched: realize() has nothing to run or check.
  bool untouched_buffer() const;
  // realize(), unless untouched_buffer() (a read leaves the last realize's report as it was)
  void realize_to_read();
  // full() without its checks, for operands the API makes itself.
  static Tensor constant(Dims shape, double value, DType dtype);
  static Tensor from_storage(std::shared_ptr<Storage> s, const Dims& shape);
  Tensor scalar_like(double v) const;
  Tensor binary(Op op, const Tensor& o) const;
  Tensor unary_float(Op op) const;
  int64_t reduced_count(const std::vector<int>& axes) const;
  // An order-reversing bijection of the dtype's values, its own inverse: max of it is min.
  Tensor order_reversed() const;
  // `what` names the user's function in errors (a repeated axis; max, min and argmax over an
  // axis of size 0, which have no identity).
  Tensor reduce(Op op, std::vector<int> axes, bool keepdim, std::string_view what = "") const;
  Tensor bitwise(Op op, const Tensor& o) const;
  // conv2d's windows times its weight, summed (tensor/composite.cpp), which pools
  friend Tensor conv_windows(const Tensor& input, const Tensor& weight, const ConvOptions& opt);
  // tinygrad's _pool: the sliding windows over the trailing axes, as (..., *out, *kernel).
  Tensor pool(const Dims& kernel, const Dims& stride, const Dims& dilation) const;
  // Running reduce along `axis` (tinygrad's _split_cumalu: two stages past 512 elements).
  Tensor cumulative(int axis, Op op) const;
  Tensor cumulative_one_stage(int axis, Op op) const;
  static uint64_t next_seed();  // manual_seed's counter
  Tensor with(UOp u) const { return Tensor(std::move(u), deps_); }
  // What the element readers (data, to_doubles, to_bytes) read: the tensor itself on one device;
  // on several, its whole value on the first (with MPI, on this process's own device: every rank
  // reads alike, so a split value is gathered onto every device first).
  Tensor readable() const;
  int axis(int a) const;
  static bool writable_view(UOp u, std::string_view what);
  // STORE value into target (this tensor's graph or a view of it), and make every live tensor over
  // the buffer read the buffer as the store leaves it.
  void write(const UOp& target, const Tensor& value);
  // assign() of a tensor on several devices: each device's buffer its part of the value
  Tensor& assign_parts(const Tensor& value);
  void link();  // into the list of live tensors
  // Every live tensor whose movement ops reach `from` reads `to` there instead (and add_deps).
  static void rebase_live(const UOp& from, const UOp& to, const StorageList& add_deps);

  // mutable: an assignment to a buffer changes the graph of every live tensor over it, a const
  // one too (its meaning, the buffer's current contents, stays)
  mutable UOp uop_;
  mutable StorageList deps_;      // every buffer the graph reads
  std::shared_ptr<Tensor> grad_;  // backward()'s accumulated gradient
  // The graph this tensor was computed by, kept when realize() replaces it with the buffer view
  // `realized_view_`: gradients still follow it (and the buffers it read) while the tensor is
  // that buffer.
  UOp computed_by_, realized_view_;
  std::vector<std::shared_ptr<Storage>> computed_by_storages_;
  const UOp& differentiable_uop() const {
    return computed_by_ && uop_ == realized_view_ ? computed_by_ : uop_;
  }
  Tensor *live_prev_ = nullptr, *live_next_ = nullptr;  // the list of live tensors
  friend struct Realizer;
  friend struct LiveTensors;
  friend class AssignmentJournal;
};

// While open, records what assignments do to the graphs of live tensors (each assignment is seen
// by every tensor over the buffer it writes), and undoes it when destroyed uncommitted: function()
// leaves no trace of a callable that threw. Journals nest; a committed one hands its records to
// the one around it.
class AssignmentJournal {
 public:
  AssignmentJournal();
  ~AssignmentJournal();
  AssignmentJournal(const AssignmentJournal&) = delete;
  AssignmentJournal& operator=(const AssignmentJournal&) = delete;
  void commit() { committed_ = true; }

 private:
  struct Entry {
    Tensor* tensor;
    UOp uop;
    StorageList deps;
  };
  std::vector<Entry> entries_;
  AssignmentJournal* outer_ = nullptr;
  bool committed_ = false;
  friend class Tensor;
  friend struct LiveTensors;
};

// How many kernels the last realize() ran, and how many elements each wrote in the order they ran
// (a custom kernel, which writes its arguments in place: 0), for fusion tests. A transfer between
// two devices' buffers counts as one, as in tinygrad's schedule. A realize() with nothing to run
// reports none; reading a tensor (to_doubles(), data()) realizes it, and reports only when that
// runs something.
int last_kernel_count();
const std::vector<int64_t>& last_kernel_outputs();
// How many of the last realize()'s generated kernels were compiled (linearized, and on CPU
// rendered and compiled by LLVM) rather than found compiled: equal kernel ASTs compile once per
// device per process.
int last_compile_count();
// Whether the last realize()'s schedule came from the schedule cache (a graph equal to one
// scheduled before up to its buffers and effect numbers; SCACHE=0 turns the cache off).
bool last_schedule_cached();
// The names of the last realize()'s generated kernels in the order they ran (codegen/kernel_name.h:
// r_16_32 for a row sum of (16, 32); a transfer as tinygrad's: "copy       16 B,   CPU:1 <- CPU ").
const std::vector<std::string>& last_kernel_names();
// Their kernel ASTs (rules/spec.rw's spec_kernel_ast; a transfer's is its COPY), for tests.
const std::vector<UOp>& last_kernel_asts();

// Devices: INTERP (the reference) and CPU (LLVM JIT), each with an optional index for a device
// with buffers of its own (CPU:1; "cpu:0" is CPU: runtime/device.h's canonical names). The default
// is $DEV, else CPU when it is available, else INTERP. set_default_device("") restores that
// default; an unknown name raises a TensorError.
void set_default_device(const std::string& name);
std::string default_device();
bool device_available(const std::string& name);
int debug_level();  // $DEBUG (2: print each kernel's source)
bool noopt();       // $NOOPT=1: generated kernels get no opts (codegen/opt.h hand_coded_opts)

}  // namespace tinyrw

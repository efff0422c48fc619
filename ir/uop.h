// UOp: the hash-consed, immutable node of every tinyrw graph.
//
// Structurally equal UOps are the same object, so `a == b` (pointer identity) is structural
// equality. A UOp is reference counted and released when nothing refers to it; releasing a long
// chain never recurses on the C++ stack. The node universe is process-wide and not thread-safe:
// build and rewrite graphs from one thread at a time.
#pragma once

#include <compare>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ir/arg.h"
#include "ir/axis.h"
#include "ir/dtype.h"
#include "ir/int128.h"
#include "ir/ops.h"

namespace tinyrw {

class UOpNode;
class SInt;
// The one shape type of the IR: sizes that may be symbolic. Dims is the same shape once every
// size is known (what tensors and devices use); to_dims/to_shape convert.
using Shape = std::vector<SInt>;
using Dims = std::vector<int64_t>;

// A bound of vmin/vmax: exact integers for int/bool/index dtypes, doubles for floats.
struct Num {
  bool is_float = false;
  i128 i = 0;
  double f = 0;

  static Num of(i128 v) { return Num{false, v, 0}; }
  static Num of_float(double v) { return Num{true, 0, v}; }
  double as_double() const;
  bool is_infinite() const;
  std::partial_ordering operator<=>(const Num& o) const;
  bool operator==(const Num& o) const { return (*this <=> o) == std::partial_ordering::equivalent; }
  std::string repr() const;  // Python syntax; infinite ints print as "inf"/"-inf"
};

// Thrown for shape, dtype or arity errors made while building or inspecting a graph.
class GraphError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class UOp {
 public:
  UOp() = default;
  UOp(const UOp& o);
  UOp(UOp&& o) noexcept : n_(o.n_) { o.n_ = nullptr; }
  UOp& operator=(const UOp& o);
  UOp& operator=(UOp&& o) noexcept;
  ~UOp();  // the handle's members are defined inline below UOpNode

  // ---- construction (hash-consed: equal arguments give the identical node)
  static UOp make(Op op, DType dtype = dtypes::void_, std::span<const UOp> src = {}, Arg arg = {},
                  Arg tag = {});
  static UOp make(Op op, DType dtype, std::initializer_list<UOp> src, Arg arg = {}, Arg tag = {});
  // A CONST whose value is converted to `dtype` (ints wrap, floats round; bools are 0/1).
  static UOp constant(DType dtype, const Arg& value);
  static UOp cint(i128 v, DType dtype = dtypes::index) { return constant(dtype, Arg::integer(v)); }
  static UOp cfloat(double v, DType dtype = dtypes::float32) {
    return constant(dtype, Arg::real(v));
  }
  static UOp cbool(bool v) { return constant(dtypes::bool_, Arg::boolean(v)); }
  // A named integer in [lo, hi] (DEFINE_VAR with arg (name, lo, hi)); one whose values are all
  // multiples of `multiple_of` (tinygrad's Variable(..., multiple_of=m)) has arg
  // (name, lo, hi, multiple_of), and divides() knows it.
  static UOp variable(std::string_view name, i128 lo, i128 hi, DType dtype = dtypes::index,
                      i128 multiple_of = 1);
  // A loop index 0..end-1: RANGE with arg (axis, type name), ir/axis.h. WEAK by default, as
  // tinygrad's (an output loop the optimizer may place).
  static UOp range(const UOp& end, int axis, AxisType type = AxisType::Weak);
  static UOp sink(std::span<const UOp> srcs);

  // ---- accessors
  explicit operator bool() const { return n_ != nullptr; }
  bool operator==(const UOp& o) const { return n_ == o.n_; }
  Op op() const;
  DType dtype() const;
  std::span<const UOp> src() const;
  const UOp& src(size_t i) const;
  size_t nsrc() const;
  const Arg& arg() const;
  const Arg& tag() const;
  size_t hash() const;
  const UOpNode* node() const { return n_; }
  bool is_const() const { return n_ && op() == Op::Const; }

  // ---- variants of this node (each is hash-consed again)
  UOp with_src(std::span<const UOp> src) const;
  UOp with_src(std::initializer_list<UOp> src) const;
  UOp with_arg(Arg arg) const;
  UOp with_dtype(DType dtype) const;
  UOp with_tag(Arg tag) const;
  // this down through a chain of `op` nodes (their first source): a buffer under its AFTERs
  // (the .rw method `u.under(After)`)
  UOp under(Op op) const;
  UOp with_op(Op op) const;

  // ---- arithmetic; scalar operands become constants of this node's dtype
  UOp const_like(i128 v) const;
  UOp const_like(double v) const;
  UOp const_like(const Arg& v) const;
  // An ALU node over this and `others`; sources that do not type (spec_alu: equal dtypes, a bool
  // condition for WHERE, ints for division and shifts, floats for EXP2...) raise a GraphError.
  UOp alu(Op op, std::span<const UOp> others) const;
  UOp alu(Op op, std::initializer_list<UOp> others) const;
  UOp operator-() const;  // x * -1 for numbers, logical not for bools
  UOp floordiv(const UOp& o) const;
  UOp floordiv(i128 v) const { return floordiv(const_like(v)); }
  UOp floormod(const UOp& o) const;
  UOp floormod(i128 v) const { return floormod(const_like(v)); }
  UOp cdiv(const UOp& o) const;
  UOp cmod(const UOp& o) const;
  UOp maximum(const UOp& o) const;
  UOp minimum(const UOp& o) const;  // -max(-a, -b), as tinygrad builds it
  UOp lt(const UOp& o) const;
  UOp lt(i128 v) const { return lt(const_like(v)); }
  UOp le(const UOp& o) const;  // !(o < this)
  UOp gt(const UOp& o) const { return o.lt(*this); }
  UOp ge(const UOp& o) const;  // !(this < o)
  UOp ne(const UOp& o) const;
  UOp eq(const UOp& o) const;  // !(this != o)
  UOp logical_not() const;
  UOp where(const UOp& a, const UOp& b) const;  // this ? a : b
  UOp cast(DType dtype) const;
  UOp bitcast(DType dtype) const;

  // ---- graph builders (ir/builders.cpp), the one place C++ builds these nodes. Each checks its
  // arguments: a movement op or tensor REDUCE goes through the node's own shape check, so a bad
  // argument raises that check's GraphError here, where the node is made.
  UOp reshape(const Shape& shape) const;                 // this when the shape is already `shape`
  UOp permute(const std::vector<int64_t>& order) const;  // out axis k is axis order[k]
  UOp expand(const Shape& shape) const;                  // this when the shape is already `shape`
  // Pad to `shape`, this at `offsets`; shrink to `sizes` from `offsets` (the nodes' own layout).
  // Each is this when it would keep every element in place.
  UOp pad(const Shape& offsets, const Shape& shape) const;
  UOp shrink(const Shape& offsets, const Shape& sizes) const;
  UOp flip(const std::vector<bool>& axes) const;  // one flag per axis
  // The tensor REDUCE over the first n axes (the node the IR stores), with op ADD, MUL or MAX.
  UOp reduce_first(Op op, int64_t n) const;
  // A reduction over `axes` (distinct, in [0, ndim)): the reduced axes are permuted first (the
  // permutation is always built), reduced, and with keepdim kept as size 1.
  UOp reduce(Op op, const std::vector<int64_t>& axes, bool keepdim = false) const;
  UOp r(Op op, const std::vector<int64_t>& axes) const { return reduce(op, axes, true); }
  // The kernel REDUCE: this accumulated with op over the loop `ranges` (RANGE nodes); arg (op, 0).
  UOp reduce_over(Op op, std::span<const UOp> ranges) const;
  UOp index(std::span<const UOp> idx) const;  // INDEX(this, idx...); integer indices
  UOp index(std::initializer_list<UOp> idx) const {
    return index(std::span<const UOp>(idx.begin(), idx.size()));
  }
  UOp after(std::span<const UOp> deps) const;  // this once `deps` ran
  UOp after(std::initializer_list<UOp> deps) const {
    return after(std::span<const UOp>(deps.begin(), deps.size()));
  }

  // ---- analyses of sums and products (ir/terms.cpp): facts about this node's structure that
  // rules build on (tinygrad's split_uop, const_factor, divides, divide_exact and pop_const, all
  // UOp methods in rules). Integer math is exact: what would leave the 128-bit range is "unknown".
  // The operands of the chain of `sep` nodes at this node, left to right: split(Add) gives the
  // terms of a sum, split(Mul) the factors of a product; a node of another op is one operand.
  std::vector<UOp> split(Op sep) const;
  // The largest integer known to divide this: a CONST's value, the CONST factor of a MUL, the gcd
  // of those of a sum's terms; 1 when none is known.
  i128 const_factor() const;
  // this / v when the integer v divides every term structurally (CONSTs by value, a MUL through
  // one of its sources); an empty UOp when it does not, or when a sum nests deeper than
  // kMaxDivideDepth ADD/MUL levels (docs/limits.md), where it is left alone.
  UOp divides(i128 v) const;
  // this / y when y, a product, divides this product factor by factor (constants by value, other
  // factors by identity); an empty UOp when it does not or the constant would be inexact.
  UOp divide_exact(const UOp& y) const;
  // (a, c) when this is sep(a, CONST c); else (this, sep's identity: 0 for ADD, 1 for MUL, none
  // for other ops).
  std::pair<UOp, Arg> pop_const(Op sep) const;
  // The nodes of the walk down the chain of `sep` nodes at this node: this node, then, while the
  // node is `sep`, its source 1 when only that one is `sep`, else its source 0 (a `sep` source 1
  // beside a `sep` source 0 is a term: (a + b) + (c + d) walks to a + b); at most `limit` nodes.
  // The last node is the bottom of the chain (a node that is not `sep`) unless the limit cut the
  // walk short. Term k of the chain is the source of node k that is not node k+1; the last node
  // is one term itself.
  std::vector<UOp> spine(Op sep, size_t limit) const;
  // The terms of that chain, top down: term k for each node k of spine(sep, limit).
  std::vector<UOp> chain_terms(Op sep, size_t limit) const;

  // ---- canonical order (ir/order.cpp): a total structural order on UOps (tinygrad's
  // UOp.tuplize order): ALU ops by op, then the irreducible ops (variables, ranges), constants
  // last; ties broken by arg, dtype, source count, then the sources left to right. Iterative.
  // Negative, 0 or positive as this sorts before, with, or after o (0 only for the same node).
  int order(const UOp& o) const;
  bool precedes(const UOp& o) const { return order(o) < 0; }

  // ---- derived properties (computed once per node, iteratively, and cached)
  Num vmin() const;
  Num vmax() const;
  // True when this tensor int value (never index) may have wrapped: an ALU node in it has an
  // exact range beyond its dtype's. Rules relying on exact integer identities must not fire then.
  bool may_wrap() const;
  std::optional<Shape> shape_opt() const;  // nullopt: the op has no shape
  Shape shape() const;                     // throws GraphError when the op has no shape
  // shape() without copying it (the builders' checks): raise as shape() would; compare to `s`.
  void check_shape() const;
  bool shape_is(const Shape& s) const;
  Arg device() const;  // a string, a tuple of strings, or None

  // One-line summary: UOp(Ops.ADD, dtypes.int, arg=None, src=(...)) with at most `depth` levels.
  std::string repr(int depth = 3) const;

 private:
  friend class UOpNode;
  friend struct UOpAccess;
  explicit UOp(UOpNode* n, bool adopt);
  UOpNode* n_ = nullptr;
};

// The node a UOp points at: hash-consed and reference counted, its sources following it in the
// same allocation. 32 bytes before the sources: the type is a 16-bit id, the arg one word, and
// the rarely set parts (the tag, lazily derived properties) live in a side block. Declared here
// so that the accessors inline (every matcher calls them); only ir/uop.cpp creates and destroys
// nodes. Not thread-safe: graphs are built on one thread.
class UOpNode {
 public:
  static constexpr uint32_t kMaxSources = (uint32_t{1} << 24) - 1;

  uint32_t refcount;
  uint32_t hash;        // the hash-consing table's near key (ir/uop.cpp node_keys)
  uint32_t op_nsrc;     // the op in the low byte, the source count above it
  uint16_t dtype_id;    // DType::from_id
  uint16_t walk_epoch;  // the epoch of the NodeSlots that last numbered this node (0: none)
  uint32_t walk_slot;   // that NodeSlots' number for it
  uint32_t extra;       // the node's side block (Derived, ir/uop_node.h) by index; 0: none yet
  Arg arg;

  Op op() const { return static_cast<Op>(op_nsrc & 0xFF); }
  uint32_t nsrc() const { return op_nsrc >> 8; }
  DType dtype() const { return DType::from_id(dtype_id); }
  UOp* srcs() { return reinterpret_cast<UOp*>(this + 1); }
  const UOp* srcs() const { return reinterpret_cast<const UOp*>(this + 1); }
};
static_assert(sizeof(UOpNode) == 32 && sizeof(UOpNode) % alignof(UOp) == 0);

// Destroys a node whose last reference went away (and, iteratively, its sources').
void release_uop_node(UOpNode* n);
[[noreturn]] void throw_bad_source_index(const UOpNode* n, size_t i);

inline UOp::UOp(UOpNode* n, bool adopt) : n_(n) {
  if (n_ && !adopt) ++n_->refcount;
}
inline UOp::UOp(const UOp& o) : n_(o.n_) {
  if (n_) ++n_->refcount;
}
inline UOp& UOp::operator=(const UOp& o) {
  if (o.n_) ++o.n_->refcount;
  UOpNode* old = n_;
  n_ = o.n_;
  if (old && --old->refcount == 0) release_uop_node(old);
  return *this;
}
inline UOp& UOp::operator=(UOp&& o) noexcept {
  if (this != &o) {
    UOpNode* old = n_;
    n_ = o.n_;
    o.n_ = nullptr;
    if (old && --old->refcount == 0) release_uop_node(old);
  }
  return *this;
}
inline UOp::~UOp() {
  if (n_ && --n_->refcount == 0) release_uop_node(n_);
}
inline Op UOp::op() const { return n_->op(); }
inline DType UOp::dtype() const { return n_->dtype(); }
inline std::span<const UOp> UOp::src() const { return {n_->srcs(), n_->nsrc()}; }
inline const UOp& UOp::src(size_t i) const {
  if (i >= n_->nsrc()) throw_bad_source_index(n_, i);
  return n_->srcs()[i];
}
inline size_t UOp::nsrc() const { return n_->nsrc(); }
inline const Arg& UOp::arg() const { return n_->arg; }
// Nodes are hash-consed, so the address is the identity. (The node's own key is laid out for the
// hash-consing table's locality, and a source's many parents share most of its bits.)
inline size_t UOp::hash() const {
  const size_t p = reinterpret_cast<uintptr_t>(n_) >> 3;
  return (p * 0x9E3779B97F4A7C15ULL) ^ (p >> 17);
}

UOp operator+(const UOp& a, const UOp& b);
UOp operator-(const UOp& a, const UOp& b);  // a + b*-1, tinygrad's canonical form
UOp operator*(const UOp& a, const UOp& b);
UOp operator&(const UOp& a, const UOp& b);
UOp operator|(const UOp& a, const UOp& b);
UOp operator^(const UOp& a, const UOp& b);
UOp operator<<(const UOp& a, const UOp& b);
UOp operator>>(const UOp& a, const UOp& b);
inline UOp operator+(const UOp& a, i128 b) { return a + a.const_like(b); }
inline UOp operator-(const UOp& a, i128 b) { return a - a.const_like(b); }
inline UOp operator*(const UOp& a, i128 b) { return a * a.const_like(b); }
inline UOp operator+(i128 a, const UOp& b) { return b.const_like(a) + b; }
inline UOp operator*(i128 a, const UOp& b) { return b.const_like(a) * b; }
inline UOp operator+(const UOp& a, int b) { return a + static_cast<i128>(b); }
inline UOp operator-(const UOp& a, int b) { return a - static_cast<i128>(b); }
inline UOp operator*(const UOp& a, int b) { return a * static_cast<i128>(b); }
inline UOp operator+(int a, const UOp& b) { return static_cast<i128>(a) + b; }
inline UOp operator*(int a, const UOp& b) { return static_cast<i128>(a) * b; }

// A symbolic size: a plain integer or an index-typed UOp.
class SInt {
 public:
  SInt(int64_t v) : v_(v) {}  // NOLINT: implicit on purpose, shapes are written as {2, 3}
  SInt(int v) : v_(v) {}      // NOLINT
  SInt(UOp u);                // folds CONSTs to plain integers
  bool is_int() const { return !u_; }
  int64_t value() const;  // throws GraphError for symbolic sizes
  const UOp& uop() const { return u_; }
  UOp as_uop() const;  // an index CONST for plain integers
  bool operator==(const SInt& o) const { return v_ == o.v_ && u_ == o.u_; }
  std::string repr() const;

 private:
  int64_t v_ = 0;
  UOp u_;
};

// How deep UOp::divides follows nested ADD and MUL nodes.
inline constexpr int kMaxDivideDepth = 512;

// The dtype of ALU op `op` over `src` (comparisons give bool), or a GraphError naming the op and
// the source dtypes when they do not type; UOp::alu and Tensor::alu build through it.
DType alu_result_dtype(Op op, std::span<const UOp> src);

std::string shape_repr(const Shape& s);
Shape to_shape(const Dims& d);
Dims to_dims(const Shape& s);  // throws GraphError for a symbolic size
// A shape as the UOp that movement ops take: a STACK of index CONSTs (or symbolic sizes).
UOp shape_to_uop(const Shape& s);
// Decodes a shape UOp (a STACK of sizes, or a single CONST for a 1-d shape).
Shape uop_to_shape(const UOp& u);

// Live-node statistics of the hash-consing table and the node arena (for tests and benchmarks).
struct UOpTableStats {
  size_t live_nodes;
  size_t buckets;      // slots of the hash-consing table
  size_t table_bytes;  // the table's slot array
  size_t node_bytes;   // the live nodes' cells in the node arena
  size_t arena_bytes;  // cells the arena ever handed out (live nodes and free cells kept for reuse)
  size_t far_nodes;    // nodes at their second, random home (their source had too many parents)
  size_t table_retained_bytes;  // slot memory kept beyond the table, for its next resize
};
UOpTableStats uop_table_stats();
size_t uop_node_bytes(
    size_t nsrc);  // bytes a node with nsrc sources occupies (without malloc overhead)

}  // namespace tinyrw

template <>
struct std::hash<tinyrw::UOp> {
  size_t operator()(const tinyrw::UOp& u) const { return u.hash(); }
};

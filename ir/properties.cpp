// Derived properties of UOps: vmin/vmax, shape and device, following the table of tinyspec.
// Each is computed bottom-up with an explicit stack (graphs may be a million nodes deep) and cached
// in the node.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "ir/uop.h"
#include "ir/uop_node.h"

namespace tinyrw {

namespace {

// Computes a property for `root` and every source it depends on, children first.
// The walk's stack lives in a fixed buffer while it is shallow (most new nodes have their sources'
// properties already), and moves to the heap past that.
template <class Has, class Compute>
void compute_bottom_up(UOpNode* root, Has has, Compute compute) {
  if (has(root)) return;
  using Entry = std::pair<UOpNode*, uint32_t>;
  constexpr size_t kInline = 32;
  Entry inline_stack[kInline];
  std::vector<Entry> heap;
  size_t depth = 0;
  auto top = [&]() -> Entry& { return depth <= kInline ? inline_stack[depth - 1] : heap.back(); };
  auto push = [&](UOpNode* n) {
    if (depth < kInline)
      inline_stack[depth] = {n, 0};
    else
      heap.emplace_back(n, 0);
    ++depth;
  };
  auto pop = [&] {
    if (depth > kInline) heap.pop_back();
    --depth;
  };
  push(root);
  while (depth > 0) {
    Entry& e = top();
    UOpNode* n = e.first;
    if (e.second < n->nsrc()) {
      UOpNode* c = UOpAccess::node(n->srcs()[e.second++]);
      if (!has(c)) push(c);
      continue;
    }
    if (!has(n)) compute(n);
    pop();
  }
}

// ---- vmin / vmax
// ------------------------------------------------------------------------------------

struct Bounds {
  Num lo, hi;
};

Bounds dtype_bounds(DType d) {
  if (d.is_float()) return {Num::of_float(-INFINITY), Num::of_float(INFINITY)};
  if (d.is_int() || d.is_bool()) return {Num::of(d.int_min()), Num::of(d.int_max())};
  return {Num::of(-kInfinity), Num::of(kInfinity)};
}

Bounds bounds_of(const UOp& u) {
  const Derived& d = *derived_of(UOpAccess::node(u));
  return {d.vmin, d.vmax};
}

i128 as_int_bound(const Num& n, bool upper) {
  if (!n.is_float) return n.i;
  if (std::isnan(n.f)) return upper ? kInfinity : -kInfinity;
  if (std::isinf(n.f)) return n.f > 0 ? kInfinity : -kInfinity;
  const double t = upper ? std::floor(n.f) : std::ceil(n.f);
  if (std::fabs(t) >= 1e36) return t > 0 ? kInfinity : -kInfinity;
  return static_cast<i128>(t);
}

int sign(i128 v) { return v > 0 ? 1 : v < 0 ? -1 : 0; }

// Division of range corners; infinite operands stay infinite (or become 0/-1 when divided by them).
i128 corner_div(i128 a, i128 b, bool floor) {
  if (is_infinite(a)) return sign(a) * sign(b) > 0 ? kInfinity : -kInfinity;
  if (is_infinite(b)) return floor && sign(a) * sign(b) < 0 ? -1 : 0;
  return floor ? floor_div(a, b) : trunc_div(a, b);
}

// Infinite bounds only ever point outward. A lower bound that saturated to +inf (the value is at
// least that large) becomes the largest finite number, which is still a true lower bound: kept as
// +inf it would compare equal to an unbounded upper bound and "prove" x == y or x >= y.
Bounds int_bounds(i128 lo, i128 hi) {
  return {Num::of(lo >= kInfinity ? kInfinity - 1 : saturate(lo)),
          Num::of(hi <= -kInfinity ? -(kInfinity - 1) : saturate(hi))};
}

Bounds corners(i128 a, i128 A, i128 b, i128 B, i128 (*f)(i128, i128)) {
  const i128 v[] = {f(a, b), f(a, B), f(A, b), f(A, B)};
  return int_bounds(*std::min_element(v, v + 4), *std::max_element(v, v + 4));
}

std::optional<Bounds> int_alu_bounds(const UOp& u) {
  const Op op = u.op();
  const DType dt = u.dtype();
  if (u.nsrc() < 1 || !groups::alu().contains(op)) return std::nullopt;
  auto src_int = [&](size_t k) {
    Bounds b = bounds_of(u.src(k));
    return std::pair<i128, i128>{as_int_bound(b.lo, false), as_int_bound(b.hi, true)};
  };
  if (op == Op::Neg) {
    auto [a, A] = src_int(0);
    return int_bounds(sat_neg(A), sat_neg(a));
  }
  if (op == Op::Where) {
    const Bounds c = bounds_of(u.src(0));
    if (c.lo.i == 1) return bounds_of(u.src(1));
    if (c.hi.i == 0) return bounds_of(u.src(2));
    auto [b, B] = src_int(1);
    auto [c2, C] = src_int(2);
    return int_bounds(std::min(b, c2), std::max(B, C));
  }
  if (u.nsrc() != 2) return std::nullopt;
  auto [a, A] = src_int(0);
  auto [b, B] = src_int(1);
  const bool rhs_const = b == B && !is_infinite(b);
  switch (op) {
    case Op::Add:
      return int_bounds(sat_add(a, b), sat_add(A, B));
    case Op::Sub:
      return int_bounds(sat_sub(a, B), sat_sub(A, b));
    case Op::Mul:
      return corners(a, A, b, B, [](i128 x, i128 y) { return sat_mul(x, y); });
    case Op::Max:
      return int_bounds(std::max(a, b), std::max(A, B));
    case Op::And:
      if (dt.is_bool()) return int_bounds(a && b, A && B);
      if (rhs_const && b >= 0) return a < 0 ? int_bounds(0, b) : int_bounds(0, std::min(A, b));
      return std::nullopt;
    case Op::Or:
      if (dt.is_bool()) return int_bounds(a || b, A || B);
      return std::nullopt;
    case Op::Xor:
      if (rhs_const && b == -1 && dt.is_int())
        return int_bounds(sat_sub(sat_neg(A), 1), sat_sub(sat_neg(a), 1));
      return std::nullopt;
    case Op::Shl:
      if (rhs_const && b >= 0 && b < 120) {
        const i128 m = static_cast<i128>(1) << static_cast<int>(b);
        return int_bounds(sat_mul(a, m), sat_mul(A, m));
      }
      return std::nullopt;
    case Op::Shr:
      if (rhs_const && b >= 0 && b < 120) {
        const i128 m = static_cast<i128>(1) << static_cast<int>(b);
        return int_bounds(corner_div(a, m, true), corner_div(A, m, true));
      }
      return std::nullopt;
    case Op::CmpLt:
      return int_bounds(A < b, a < B);
    case Op::CmpNe:
      return int_bounds(A < b || B < a, !(a == A && A == b && b == B));
    case Op::CmpEq:
      return int_bounds(a == A && A == b && b == B, !(A < b || B < a));
    case Op::CDiv:
    case Op::FloorDiv: {
      const bool floor = op == Op::FloorDiv;
      if (a > A) return int_bounds(0, 0);
      if (b > 0 || B < 0) {  // the divisor range excludes zero
        const i128 v[] = {corner_div(a, b, floor), corner_div(a, B, floor), corner_div(A, b, floor),
                          corner_div(A, B, floor)};
        return int_bounds(*std::min_element(v, v + 4), *std::max_element(v, v + 4));
      }
      return std::nullopt;
    }
    case Op::CMod:
      if (rhs_const && b > 0) {
        const i128 k = b;
        const i128 lo = a > 0 ? 0 : a > -k ? a : -(k - 1);
        const i128 hi = A < 0 ? 0 : A < k ? A : k - 1;
        return int_bounds(lo, hi);
      }
      if (b > 0 || B < 0) {
        const i128 m = b > 0 ? B : sat_neg(b);
        if (a >= 0) return int_bounds(0, sat_sub(m, 1));
        if (A <= 0) return int_bounds(sat_neg(sat_sub(m, 1)), 0);
        return int_bounds(sat_neg(sat_sub(m, 1)), sat_sub(m, 1));
      }
      return std::nullopt;
    case Op::FloorMod:
      if (a > A) return int_bounds(0, 0);
      if (rhs_const && b != 0 && !is_infinite(a) && !is_infinite(A)) {
        const i128 k = b;
        if (floor_div(a, k) == floor_div(A, k)) return int_bounds(floor_mod(a, k), floor_mod(A, k));
        return k > 0 ? int_bounds(0, k - 1) : int_bounds(k + 1, 0);
      }
      // a modulo by a divisor of one sign has that sign and is smaller than it; one of a
      // dividend of the same sign is no larger than the dividend either (x%y == x when |x| < |y|)
      if (b > 0) return int_bounds(0, a >= 0 ? std::min(A, sat_sub(B, 1)) : sat_sub(B, 1));
      if (B < 0) return int_bounds(A <= 0 ? std::max(a, sat_add(b, 1)) : sat_add(b, 1), 0);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

Bounds compute_bounds(const UOp& u, bool& wraps) {
  const DType dt = u.dtype();
  const Op op = u.op();
  switch (op) {
    case Op::Const: {
      const Arg& v = u.arg();
      if (v.is_float()) return {Num::of_float(v.as_float()), Num::of_float(v.as_float())};
      if (v.is_int() || v.is_bool()) return {Num::of(v.as_int()), Num::of(v.as_int())};
      return dtype_bounds(dt);
    }
    case Op::DefineVar: {
      // an int variable's bounds, or a float one's (reduce collapse stands them in for values)
      auto items = u.arg().items();
      auto bound = [](const Arg& a) {
        return a.is_float() ? Num::of_float(a.as_float()) : Num::of(a.as_int());
      };
      return {bound(items[1]), bound(items[2])};
    }
    case Op::Range:
    case Op::Special: {
      const i128 end = as_int_bound(bounds_of(u.src(0)).hi, true);
      return int_bounds(0, sat_sub(end, 1));
    }
    case Op::Bind:
    case Op::After:
    case Op::Copy:
    case Op::Detach:
    case Op::Contiguous:
    case Op::ContiguousBackward:
    case Op::Reshape:
    case Op::Permute:
    case Op::Expand:
    case Op::Shrink:
    case Op::Flip:
      return bounds_of(u.src(0));
    case Op::Index:
      if (!u.src(0).dtype().is_ptr()) return bounds_of(u.src(0));
      return dtype_bounds(dt);
    case Op::Stack: {
      if (u.nsrc() == 0) return dtype_bounds(dt);
      Bounds out = bounds_of(u.src(0));
      for (const UOp& s : u.src()) {
        const Bounds b = bounds_of(s);
        if (b.lo < out.lo) out.lo = b.lo;
        if (b.hi > out.hi) out.hi = b.hi;
      }
      return out;
    }
    case Op::Cast: {
      const Bounds s = bounds_of(u.src(0));
      if (dt.is_float()) {
        return {Num::of_float(s.lo.as_double()), Num::of_float(s.hi.as_double())};
      }
      if (!dt.is_int()) return dtype_bounds(dt);
      const i128 a = as_int_bound(s.lo, false), A = as_int_bound(s.hi, true);
      if (dt.is_unsigned()) {
        if (a >= 0 && A <= dt.int_max()) return int_bounds(a, A);
        return dtype_bounds(dt);
      }
      // a source beyond the dtype's range wraps: any value of the dtype is possible
      if (a >= dt.int_min() && A <= dt.int_max()) return int_bounds(a, A);
      return dtype_bounds(dt);
    }
    default:
      break;
  }
  if (!dt.is_float() && (dt.is_int() || dt.is_bool())) {
    if (auto b = int_alu_bounds(u)) {
      // a tensor int wraps (tinyspec): an exact range beyond the dtype's may hold any value of it
      if (dt.is_int() && !dt.is_index()) {
        const Bounds full = dtype_bounds(dt);
        if (b->lo < full.lo || b->hi > full.hi) {
          wraps = true;
          return full;
        }
      }
      return *b;
    }
  }
  return dtype_bounds(dt);
}

// Whether the value of n may have wrapped: n itself (see compute_bounds) or an ALU source.
bool wraps_below(const UOpNode* n, bool self) {
  if (self) return true;
  if (!groups::alu().contains(n->op())) return false;
  for (uint32_t i = 0; i < n->nsrc(); ++i)
    if (derived_of(UOpAccess::node(n->srcs()[i]))->may_wrap) return true;
  return false;
}

void ensure_bounds(const UOp& u) {
  compute_bottom_up(
      UOpAccess::node(u),
      [](UOpNode* n) {
        const Derived* d = derived_of(n);
        return d && d->has_range;
      },
      [](UOpNode* n) {
        bool wraps = false;
        const Bounds b = compute_bounds(UOpAccess::borrow(n), wraps);
        const bool below = wraps_below(n, wraps);
        Derived& d = derive(n);
        d.vmin = b.lo;
        d.vmax = b.hi;
        d.may_wrap = below;
        d.has_range = true;
      });
}

// ---- shape
// ------------------------------------------------------------------------------------------

[[noreturn]] void shape_error(const UOp& u, const std::string& why) {
  throw GraphError(fmt::format("{}: {}", op_info(u.op()).py_name, why));
}

// The value a RETURNED stands for: output i of its CALL's SINK(outputs...) body.
const UOp& returned_value(const UOp& r) {
  const UOp& call = r.src(0);
  if (call.op() != Op::Call || call.src(0).op() != Op::Sink)
    shape_error(r, "needs a CALL whose body is SINK(outputs...)");
  const i128 i = r.arg().is_int() ? r.arg().as_int() : -1;
  if (i < 0 || i >= static_cast<i128>(call.src(0).nsrc()))
    shape_error(
        r, fmt::format("output {} of a CALL with {} outputs", r.arg().repr(), call.src(0).nsrc()));
  return call.src(0).src(static_cast<size_t>(i));
}

const std::optional<Shape>& cached_shape(const UOp& u) {
  const Derived& d = *derived_of(UOpAccess::node(u));
  if (!d.shape_error.empty()) throw GraphError(d.shape_error);
  return d.shape;
}

const Shape& src_shape(const UOp& u, size_t i) {
  const std::optional<Shape>& s = cached_shape(u.src(i));
  if (!s) shape_error(u, fmt::format("source {} ({}) has no shape", i, op_name(u.src(i).op())));
  return *s;
}

// Proves two sizes equal or different when both are known; symbolic sizes compare by identity.
bool same_size(const SInt& a, const SInt& b) { return a == b; }
bool is_one(const SInt& s) { return s.is_int() && s.value() == 1; }
bool is_nonneg(const SInt& s) { return s.is_int() ? s.value() >= 0 : s.uop().vmin() >= Num::of(0); }

// A size computed exactly, refused when it does not fit int64.
int64_t int64_size(const UOp& u, i128 v) {
  if (v > INT64_MAX || v < INT64_MIN)
    shape_error(u, fmt::format("a size of {} overflows int64", to_string(v)));
  return static_cast<int64_t>(v);
}

// The element count of a shape: concrete sizes multiply exactly (a count past int64 is an error,
// never a wrapped number that could match another shape), symbolic ones as index UOps.
SInt size_product(const UOp& u, const Shape& s) {
  i128 p = 1;
  UOp sym;
  for (const SInt& d : s) {
    if (d.is_int()) {
      p *= d.value();
      if (p > INT64_MAX || p < INT64_MIN)
        shape_error(u, fmt::format("the element count of {} overflows int64", shape_repr(s)));
    } else {
      sym = sym ? sym * d.uop() : d.uop();
    }
  }
  if (!sym) return SInt(static_cast<int64_t>(p));
  return p == 1 ? SInt(sym) : SInt(sym * p);
}

std::optional<Shape> broadcast_shapes(const UOp& u) {
  size_t rank = 0;
  for (size_t i = 0; i < u.nsrc(); ++i) rank = std::max(rank, src_shape(u, i).size());
  Shape out(rank, SInt(1));
  for (size_t i = 0; i < u.nsrc(); ++i) {
    const Shape& s = src_shape(u, i);
    for (size_t k = 0; k < s.size(); ++k) {
      SInt& o = out[rank - s.size() + k];
      if (is_one(s[k])) continue;
      if (is_one(o)) {
        o = s[k];
      } else if (!same_size(o, s[k])) {
        shape_error(u, "shape mismatch: objects cannot be broadcast to a single shape");
      }
    }
  }
  return out;
}

Shape movement_arg(const UOp& u, size_t i) { return uop_to_shape(u.src(i)); }

std::optional<Shape> compute_shape(const UOp& u) {
  const Op op = u.op();
  switch (op) {
    case Op::If:
    case Op::Barrier:
    case Op::Sink:
    case Op::RewriteError:
    case Op::EndIf:
    case Op::Group:
    case Op::Linear:
    case Op::Program:
    case Op::Source:
    case Op::CustomFunction:
    case Op::Call:
      return std::nullopt;
    case Op::Ins:
    case Op::Custom:
    case Op::CustomI:
      if (u.dtype().is_void()) return std::nullopt;
      return Shape{};
    case Op::Noop:
      if (u.nsrc() == 0) return std::nullopt;
      return cached_shape(u.src(0));
    case Op::Const:
    case Op::GetAddr:
    case Op::Bind:
    case Op::Range:
    case Op::Special:
    case Op::DefineVar:
      return Shape{};
    case Op::Binary:
      return Shape{static_cast<int64_t>(u.arg().as_string().size())};
    case Op::Returned:  // output i of a function CALL: its body is SINK(outputs...)
      return cached_shape(returned_value(u));
    case Op::Buffer:
    case Op::Param: {
      if (u.nsrc() == 1) return uop_to_shape(u.src(0));
      const Arg* size = u.arg().is_record() ? u.arg().find_field("size") : nullptr;
      if (!size || size->is_none()) return Shape{};
      return Shape{static_cast<int64_t>(size->as_int())};
    }
    case Op::MStack:
    case Op::MSelect:
    case Op::Detach:
    case Op::Contiguous:
    case Op::ContiguousBackward:
    case Op::After:
    case Op::Load:
    case Op::Copy:
    case Op::AllReduce:
    case Op::Store:
    case Op::End:
      return cached_shape(u.src(0));
    case Op::Index: {
      const Shape& base = src_shape(u, 0);
      Shape out;
      for (size_t i = 1; i < u.nsrc(); ++i) {
        const Shape& s = src_shape(u, i);
        out.insert(out.end(), s.begin(), s.end());
      }
      if (u.nsrc() - 1 > base.size()) shape_error(u, "too many indices");
      out.insert(out.end(), base.begin() + static_cast<long>(u.nsrc() - 1), base.end());
      return out;
    }
    case Op::Stack: {
      if (u.nsrc() == 0) return Shape{};
      Shape out{static_cast<int64_t>(u.nsrc())};
      const Shape& s0 = src_shape(u, 0);
      for (size_t i = 1; i < u.nsrc(); ++i) {
        if (src_shape(u, i) != s0) shape_error(u, "sources of a stack must have equal shapes");
      }
      out.insert(out.end(), s0.begin(), s0.end());
      return out;
    }
    case Op::Stage: {
      Shape out;
      for (size_t i = 1; i < u.nsrc(); ++i) {
        const Num hi = u.src(i).vmax();
        if (hi.is_infinite() || hi.is_float) shape_error(u, "range bound is not finite");
        out.emplace_back(static_cast<int64_t>(hi.i + 1));
      }
      const Shape& s0 = src_shape(u, 0);
      out.insert(out.end(), s0.begin(), s0.end());
      return out;
    }
    case Op::Wmma:
      return cached_shape(u.src(2));
    case Op::Bitcast: {
      Shape s = src_shape(u, 0);
      const int in = u.src(0).dtype().itemsize(), out = u.dtype().itemsize();
      if (in != out && !s.empty()) {
        const i128 bytes = static_cast<i128>(s.back().value()) * in;  // exact
        if (bytes % out != 0) shape_error(u, "unsupported size in bitcast");
        s.back() = SInt(int64_size(u, bytes / out));
      }
      return s;
    }
    case Op::Cast:
      return src_shape(u, 0);
    case Op::Reshape: {
      const Shape& ps = src_shape(u, 0);
      Shape ns = movement_arg(u, 1);
      for (const SInt& d : ns)
        if (!is_nonneg(d)) shape_error(u, "shape can't contain negative numbers");
      const SInt a = size_product(u, ps), b = size_product(u, ns);
      if (a.is_int() && b.is_int() && a.value() != b.value()) {
        shape_error(u, fmt::format("bad reshape: {} -> {}", shape_repr(ps), shape_repr(ns)));
      }
      return ns;
    }
    case Op::Expand: {
      const Shape& ps = src_shape(u, 0);
      Shape ns = movement_arg(u, 1);
      if (ns.size() != ps.size()) {
        shape_error(
            u, fmt::format("cannot expand {} to {}: ranks differ", shape_repr(ps), shape_repr(ns)));
      }
      for (size_t k = 0; k < ps.size(); ++k) {
        if (!is_one(ps[k]) && !same_size(ps[k], ns[k])) {
          shape_error(u, fmt::format("cannot expand {} to {}", shape_repr(ps), shape_repr(ns)));
        }
      }
      return ns;
    }
    case Op::Permute: {
      const Shape& ps = src_shape(u, 0);
      auto perm = u.arg().items();
      std::vector<bool> seen(ps.size(), false);
      Shape out;
      if (perm.size() != ps.size()) shape_error(u, "invalid permutation");
      for (const Arg& p : perm) {
        const i128 k = p.as_int();
        if (k < 0 || k >= static_cast<i128>(ps.size()) || seen[static_cast<size_t>(k)]) {
          shape_error(u, "invalid permutation " + u.arg().repr());
        }
        seen[static_cast<size_t>(k)] = true;
        out.push_back(ps[static_cast<size_t>(k)]);
      }
      return out;
    }
    case Op::Pad:
    case Op::Shrink: {
      const Shape& ps = src_shape(u, 0);
      const Shape off = movement_arg(u, 1), ns = movement_arg(u, 2);
      const char* what = op == Op::Pad ? "invalid pad" : "invalid shrink";
      if (off.size() != ps.size() || ns.size() != ps.size()) shape_error(u, what);
      for (size_t k = 0; k < ps.size(); ++k) {
        if (!off[k].is_int() || !ns[k].is_int() || !ps[k].is_int()) continue;  // symbolic: trust
        const i128 o = off[k].value(), s = ns[k].value(), p = ps[k].value();   // no overflow
        const bool ok =
            op == Op::Pad ? (s >= 0 && o >= 0 && o + p <= s) : (s >= 0 && o >= 0 && o + s <= p);
        if (!ok)
          shape_error(u, fmt::format("{} of {} with offsets {} and sizes {}", what, shape_repr(ps),
                                     shape_repr(off), shape_repr(ns)));
      }
      return ns;
    }
    case Op::Flip: {
      const Shape& ps = src_shape(u, 0);
      if (!u.arg().is_tuple() || u.arg().items().size() != ps.size()) shape_error(u, "bad flip");
      for (const Arg& a : u.arg().items())
        if (!a.is_bool()) shape_error(u, "bad flip");
      return ps;
    }
    case Op::Unshard: {  // each split axis times the count of its range (else of the devices)
      Shape s = src_shape(u, 0);
      const Arg dev = u.src(0).device();
      int64_t n = dev.is_tuple() ? static_cast<int64_t>(dev.items().size()) : 1;
      if (u.nsrc() > 1 && u.src(1).op() == Op::Range && u.src(1).src(0).op() == Op::Const)
        n = static_cast<int64_t>(u.src(1).src(0).arg().as_int());
      for (const Arg& ax :
           u.arg().is_tuple() ? u.arg().items() : std::span<const Arg>(&u.arg(), 1)) {
        const i128 k = ax.as_int();
        if (k < 0 || k >= static_cast<i128>(s.size())) shape_error(u, "shard axis out of range");
        s[static_cast<size_t>(k)] =
            SInt(int64_size(u, static_cast<i128>(s[static_cast<size_t>(k)].value()) * n));
      }
      return s;
    }
    case Op::Reduce: {
      const Shape& ps = src_shape(u, 0);
      auto a = u.arg().items();
      if (a.size() != 2 || !a[1].is_int() || a[1].as_int() < 0 ||
          a[1].as_int() > static_cast<i128>(ps.size())) {
        shape_error(u, "invalid type for axis");
      }
      return Shape(ps.begin() + static_cast<long>(a[1].as_int()), ps.end());
    }
    default:
      break;
  }
  if (groups::unary().contains(op)) return src_shape(u, 0);
  if (groups::binary().contains(op) || groups::ternary().contains(op)) return broadcast_shapes(u);
  shape_error(u, fmt::format("no shape handling for {} with {}", op_name(op), u.dtype().repr()));
}

void ensure_shape(const UOp& u) {
  compute_bottom_up(
      UOpAccess::node(u),
      [](UOpNode* n) {
        const Derived* d = derived_of(n);
        return d && d->has_shape;
      },
      [](UOpNode* n) {
        std::optional<Shape> s;
        std::string err;
        try {
          s = compute_shape(UOpAccess::borrow(n));
        } catch (const GraphError& e) {
          err = e.what();
        }
        Derived& d = derive(n);
        d.shape = std::move(s);
        d.shape_error = std::move(err);
        d.has_shape = true;
      });
}

// ---- device
// -----------------------------------------------------------------------------------------

Arg compute_device(const UOp& u) {
  auto src_dev = [&](size_t i) { return derived_of(UOpAccess::node(u.src(i)))->device; };
  switch (u.op()) {
    case Op::Returned:
      return derived_of(UOpAccess::node(returned_value(u)))->device;
    case Op::Param:
    case Op::Buffer: {
      const Arg* d = u.arg().is_record() ? u.arg().find_field("device") : nullptr;
      return d ? *d : Arg();
    }
    case Op::Stage: {  // rangeify's STAGE is on the device of what it stages
      if (const Arg* d = u.arg().is_record() ? u.arg().find_field("device") : nullptr) return *d;
      return src_dev(0);
    }
    case Op::After:
      return src_dev(0);
    case Op::MSelect: {
      const Arg d = src_dev(0);
      if (!d.is_tuple()) throw GraphError("MSELECT needs a multi-device source");
      const i128 k = u.arg().as_int();
      if (k < 0 || k >= static_cast<i128>(d.items().size()))
        throw GraphError("MSELECT index out of range");
      return d.items()[static_cast<size_t>(k)];
    }
    case Op::MStack: {
      std::vector<Arg> devs;
      for (size_t i = 0; i < u.nsrc(); ++i) devs.push_back(src_dev(i));
      return Arg::tuple(std::move(devs));
    }
    case Op::Copy:
      return u.arg();
    case Op::AllReduce:
      return u.arg().items()[1];
    default:
      for (size_t i = 0; i < u.nsrc(); ++i) {
        if (!src_dev(i).is_none()) return src_dev(i);
      }
      return Arg();
  }
}

}  // namespace

namespace {
// The bounds of a node asked before (the common case) without a call into the walk.
const Derived& bounds_block(const UOp& u) {
  const Derived* d = derived_of(UOpAccess::node(u));
  if (d && d->has_range) return *d;
  ensure_bounds(u);
  return *derived_of(UOpAccess::node(u));
}
}  // namespace

Num UOp::vmin() const { return bounds_block(*this).vmin; }
Num UOp::vmax() const { return bounds_block(*this).vmax; }
bool UOp::may_wrap() const { return bounds_block(*this).may_wrap; }
std::optional<Shape> UOp::shape_opt() const {
  ensure_shape(*this);
  return cached_shape(*this);
}
Shape UOp::shape() const {
  check_shape();
  return *cached_shape(*this);
}
void UOp::check_shape() const {
  ensure_shape(*this);
  if (!cached_shape(*this))
    throw GraphError(
        fmt::format("shape requested, but {} doesn't have a shape", op_info(op()).py_name));
}
bool UOp::shape_is(const Shape& s) const {
  check_shape();
  return *cached_shape(*this) == s;
}
Arg UOp::device() const {
  compute_bottom_up(
      n_,
      [](UOpNode* n) {
        const Derived* d = derived_of(n);
        return d && d->has_device;
      },
      [](UOpNode* n) {
        Arg dev = compute_device(UOpAccess::borrow(n));
        Derived& d = derive(n);
        d.device = std::move(dev);
        d.has_device = true;
      });
  return derived_of(n_)->device;
}

}  // namespace tinyrw

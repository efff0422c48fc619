// Primitives and analyses of rules/symbolic.rw: the rewrites are rules there, over the analyses of
// sums and products on UOp (ir/terms.cpp), and the bounded chain searches of combine_divmod_terms
// (which keep long sums linear). All integer math is exact (Python floor semantics for // and %):
// a fold whose arithmetic would leave the exact 128-bit range, or use an unbounded (saturated)
// vmin/vmax, is not done.
#include <algorithm>
#include <numeric>
#include <tuple>

#include "dsl/typed_helper.h"
#include "ir/alu.h"
#include "ir/graph.h"

namespace tinyrw::rw {
namespace {

// The chain of ADDs under top, the larger side of a sum in combine_divmod_terms
// (rules/symbolic.rw): calls f(term, node) for each term, k = 0 at the top, where node is the ADD
// the term hangs off (null for the bottom term, whose node is the term itself). The walk follows
// the one source that is an ADD, stops where both are (that node counts as one term) and after
// kMaxPairSearch terms, so one walk costs at most that many steps.
constexpr size_t kMaxPairSearch = 1024;
template <class F>
void walk_chain(const UOp& top, F&& f) {
  const UOp* u = &top;
  for (size_t k = 0; k < kMaxPairSearch; ++k) {
    const bool add0 = u->op() == Op::Add && u->src(0).op() == Op::Add;
    const bool add1 = u->op() == Op::Add && u->src(1).op() == Op::Add;
    if (u->op() != Op::Add || (add0 && add1)) {  // the bottom: one term
      f(*u, nullptr);
      return;
    }
    if (!f(u->src(add1 ? 0 : 1), u)) return;
    u = &u->src(add1 ? 1 : 0);
  }
}

// ---- canonical order of commutative sources: ALU ops (by op), then variables, then constants.

int rank(Op op) {
  if (op == Op::Const) return 3 * kNumOps;
  if (groups::irreducible().contains(op)) return 2 * kNumOps + static_cast<int>(op);
  return static_cast<int>(op);
}

int compare_args(const Arg& a, const Arg& b) {
  if (a.kind() != b.kind()) return a.kind() < b.kind() ? -1 : 1;
  switch (a.kind()) {
    case Arg::Kind::Int:
    case Arg::Kind::Bool:
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    case Arg::Kind::Float:
      return a.as_float() < b.as_float() ? -1 : a.as_float() > b.as_float() ? 1 : 0;
    case Arg::Kind::String:
      return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
    case Arg::Kind::Tuple: {
      auto x = a.items(), y = b.items();
      for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
        if (int c = compare_args(x[i], y[i])) return c;
      return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    default: {
      const std::string ra = a.repr(), rb = b.repr();
      return ra < rb ? -1 : ra > rb ? 1 : 0;
    }
  }
}

// Total order on UOps (iterative, structural): rank, arg, dtype, sources.
int compare_uops(const UOp& a0, const UOp& b0) {
  std::vector<std::pair<UOp, UOp>> stack{{a0, b0}};
  while (!stack.empty()) {
    auto [a, b] = stack.back();
    stack.pop_back();
    if (a == b) continue;
    if (rank(a.op()) != rank(b.op())) return rank(a.op()) < rank(b.op()) ? -1 : 1;
    if (int c = compare_args(a.arg(), b.arg())) return c;
    if (a.dtype() != b.dtype()) return a.dtype().name() < b.dtype().name() ? -1 : 1;
    if (a.nsrc() != b.nsrc()) return a.nsrc() < b.nsrc() ? -1 : 1;
    for (size_t i = a.nsrc(); i-- > 0;) stack.emplace_back(a.src(i), b.src(i));
  }
  return 0;
}

// ---- registration
// Each helper's comment line says why it is C++.

// C++: exact constant folding with the dtype semantics of exec_alu (a primitive).
const HelperRegistrar kFoldConst(typed_helper(
    "fold_const",
    +[](const UOp& u) {
      std::vector<Arg> args;
      for (const UOp& s : u.src()) args.push_back(s.arg());
      const std::optional<Arg> r = exec_alu(u.op(), u.dtype(), args);
      return r ? u.const_like(*r) : UOp();
    },
    "fold_const(a): the constant an ALU op of constants evaluates to (none if undefined)"));

// C++: an analysis (a total structural order on UOps), not a rewrite.
const HelperRegistrar kOrder(typed_helper(
    "sources_out_of_order",
    +[](const UOp& u) { return u.nsrc() == 2 && compare_uops(u.src(1), u.src(0)) < 0; },
    "sources_out_of_order(x): the two sources are not in canonical order"));

// C++: bounded searches of a chain (primitives, not rewrites): they keep the pair search of
// combine_divmod_terms linear in a long sum, walking pointers and building no values.
const HelperRegistrar kChainIndices(typed_helper(
    "chain_indices",
    +[](const UOp& top, const std::vector<Value>& ts) {
      std::vector<Value> out(ts.size(), Value::integer(-1));
      if (ts.empty()) return out;
      i128 k = 0;
      walk_chain(top, [&](const UOp& u, const UOp*) {
        for (size_t i = 0; i < ts.size(); ++i)
          if (ts[i].is_uop() && ts[i].as_uop() == u && out[i].as_int() < 0)
            out[i] = Value::integer(k);
        ++k;
        return true;
      });
      return out;
    },
    "chain_indices(s, ts): for each of ts, its index among the terms of the chain of ADDs under s,"
    " or -1"));
const HelperRegistrar kChainMods(typed_helper(
    "chain_mods",
    +[](const UOp& top, const std::vector<Value>& nums) {
      std::vector<Value> out;
      auto in_nums = [&](const UOp& x) {
        return std::any_of(nums.begin(), nums.end(),
                           [&](const Value& n) { return n.is_uop() && n.as_uop() == x; });
      };
      if (nums.empty()) return out;
      i128 k = 0;
      walk_chain(top, [&](const UOp& u, const UOp*) {
        const bool mul = u.op() == Op::Mul && u.src(1).is_const() && u.src(1).arg().is_int();
        const UOp& m = mul ? u.src(0) : u;
        if (m.op() == Op::FloorMod &&
            (in_nums(m.src(0)) || (m.src(0).op() == Op::FloorDiv && in_nums(m.src(0).src(0)))))
          out.push_back(Value::tuple({Value::integer(k), Value::uop(u)}));
        ++k;
        return true;
      });
      return out;
    },
    "chain_mods(s, nums): (index, term) for the terms k*(x%c) of the chain of ADDs under s whose x,"
    " or x's numerator, is in nums"));
const HelperRegistrar kChainTerms(typed_helper(
    "chain_terms",
    +[](const UOp& top, i128 n) {
      std::vector<Value> out;
      walk_chain(top, [&](const UOp& u, const UOp*) {
        if (static_cast<i128>(out.size()) >= n) return false;
        out.push_back(Value::uop(u));
        return true;
      });
      return out;
    },
    "chain_terms(s, n): the first n terms of the chain of ADDs under s, top down"));
const HelperRegistrar kChainBelow(typed_helper(
    "chain_below",
    +[](const UOp& top, i128 j) {
      UOp below;
      i128 k = 0;
      walk_chain(top, [&](const UOp& t, const UOp* node) {
        if (k++ < j) return true;
        if (node) below = &node->src(0) == &t ? node->src(1) : node->src(0);
        return false;
      });
      return below;
    },
    "chain_below(s, j): the part of s below the j-th term of its chain of ADDs (none at the "
    "bottom)"));

// C++: a primitive of checked arithmetic (floats follow IEEE, an infinity is a value; ints
// saturate at the 128-bit limits).
const HelperRegistrar kExact(typed_helper(
    "exact",
    +[](const Value& v) { return v.kind() == Value::Kind::Float || !is_infinite(v.as_int()); },
    "exact(v): an int v is not saturated (rule arithmetic on ints saturates; a fold must not use "
    "it); any float is"));

// C++: an analysis of ranges (may_wrap is computed with the bounds).
const HelperRegistrar kMayWrap(typed_helper(
    "may_wrap", +[](const UOp& x) { return x.may_wrap(); },
    "may_wrap(x): x is a tensor int (never index) value that may have wrapped (an ALU node in it "
    "has an exact range beyond its dtype's): identities of exact integers may not hold for it"));

// C++: a primitive of checked arithmetic.
const HelperRegistrar kFits(typed_helper(
    "fits",
    +[](const UOp& x, const Value& v) {
      if (v.kind() == Value::Kind::Float) return true;
      const DType d = x.dtype();
      const i128 i = v.as_int();
      if (is_infinite(i)) return false;
      return !d.is_int() || d.is_index() || (i >= d.int_min() && i <= d.int_max());
    },
    "fits(x, v): a constant v of x's dtype is v itself (exact, and within a tensor int's range; "
    "a tensor int constant beyond it would wrap)"));

// C++: an analysis of ranges (ir/graph.h, a walk over the whole expression).
const HelperRegistrar kMayRaise(typed_helper(
    "may_raise", +[](const UOp& x) { return tinyrw::may_raise(x); },
    "may_raise(x): evaluating x may fail (a division or modulo by a range holding 0, a shift by a "
    "range holding a negative count)"));

}  // namespace
}  // namespace tinyrw::rw

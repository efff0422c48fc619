// Primitives and analyses of rules/symbolic.rw: the rewrites are rules there, over the analyses of
// sums and products on UOp (ir/terms.cpp). combine_divmod_terms is a rewrite still (its bounded
// pair search keeps long sums linear). All integer math is exact (Python floor semantics for //
// and %): a fold whose arithmetic would leave the exact 128-bit range, or use an unbounded
// (saturated) vmin/vmax, is not done.
#include <algorithm>
#include <numeric>
#include <tuple>

#include "dsl/typed_helper.h"
#include "ir/alu.h"
#include "ir/graph.h"
#include "ir/rewrite.h"

namespace tinyrw::rw {
namespace {

// Thrown by the checked arithmetic below; every helper catches it and returns none (no rewrite).
struct Inexact {};
i128 add(i128 a, i128 b) {
  i128 r = 0;
  if (!exact_add(a, b, r)) throw Inexact{};
  return r;
}
i128 sub(i128 a, i128 b) {
  i128 r = 0;
  if (!exact_sub(a, b, r)) throw Inexact{};
  return r;
}
i128 mul(i128 a, i128 b) {
  i128 r = 0;
  if (!exact_mul(a, b, r)) throw Inexact{};
  return r;
}
// A helper's result, or none when its arithmetic was not exact.
template <class F>
Value unless_inexact(F&& f) {
  try {
    return f();
  } catch (const Inexact&) {
    return Value();
  }
}

// The terms of a sum, left to right (as UOp::split(Op::Add) gives them), as pointers into the graph
// under x (which must outlive them): no reference counting, for scans of long sums.
std::vector<const UOp*> sum_terms(const UOp& x) {
  std::vector<const UOp*> out, stack{&x};
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (u->op() == Op::Add) {
      stack.push_back(&u->src(1));
      stack.push_back(&u->src(0));
    } else {
      out.push_back(u);
    }
  }
  return out;
}

// t == k * inner (k = 1 when t has no constant factor on the right).
std::pair<i128, UOp> scaled(const UOp& t) {
  if (t.op() == Op::Mul && t.src(1).is_const() && t.src(1).arg().is_int())
    return {t.src(1).arg().as_int(), t.src(0)};
  return {1, t};
}

// The terms k*c*(x//c) that combine with mod_term = k*(x%c) into k*x (also k*c*(z//(c1*c)) when
// x is z//c1), as the nodes a sum holds them as; none when mod_term is no such modulo.
std::vector<UOp> div_partners(const UOp& mod_term) {
  auto [k, m] = scaled(mod_term);
  if (m.op() != Op::FloorMod || !m.src(1).is_const() || !m.src(1).arg().is_int()) return {};
  const UOp& x = m.src(0);
  const i128 c = m.src(1).arg().as_int();
  if (c <= 0) return {};
  const i128 kc = mul(k, c);
  auto term = [&](const UOp& d) { return kc == 1 ? d : d * d.const_like(kc); };
  std::vector<UOp> out{term(x.floordiv(c))};
  if (x.op() == Op::FloorDiv && x.src(1).is_const() && x.src(1).arg().as_int() > 0)
    out.push_back(term(x.src(0).floordiv(mul(x.src(1).arg().as_int(), c))));
  return out;
}

// k*x for a pair found by div_partners.
UOp combined_term(const UOp& mod_term) {
  auto [k, m] = scaled(mod_term);
  return k == 1 ? m.src(0) : m.src(0) * k;
}

// The larger side of a sum as a chain: terms[k] hangs off the ADD nodes[k] (k = 0 at the top),
// whose other source `below(k)` holds the terms further down. The walk follows the one source that
// is an ADD, stops where both are (that node counts as one term) and after kMaxPairSearch terms,
// so one walk costs at most that many steps.
constexpr size_t kMaxPairSearch = 1024;
struct Chain {
  std::vector<const UOp*> nodes, terms;
  const UOp* below(size_t k) const {  // empty past the bottom
    if (!nodes[k]) return nullptr;
    return &nodes[k]->src(&nodes[k]->src(0) == terms[k] ? 1 : 0);
  }
};
Chain walk_chain(const UOp& top) {
  Chain c;
  const UOp* u = &top;
  while (c.terms.size() < kMaxPairSearch) {
    const bool add0 = u->op() == Op::Add && u->src(0).op() == Op::Add;
    const bool add1 = u->op() == Op::Add && u->src(1).op() == Op::Add;
    if (u->op() != Op::Add || (add0 && add1)) {  // the bottom: one term
      c.nodes.push_back(nullptr);
      c.terms.push_back(u);
      break;
    }
    c.nodes.push_back(u);
    c.terms.push_back(&u->src(add1 ? 0 : 1));
    u = &u->src(add1 ? 1 : 0);
  }
  return c;
}

// k*(x%c) + k*c*(x//c) == k*x: finds such a pair among the terms of a sum (in any order, with
// other terms between them) and combines it. The rewrite runs children first, so each source is
// already free of pairs: only a pair with one term on each side is new. The side without an ADD
// is searched first and the other side walked only when it holds a division or modulo (at most
// kMaxPairSearch terms deep); the result keeps the part of the sum below the pair as it is, so a
// long sum is not rebuilt, nor rewritten again, for each pair.
UOp combine_divmod_terms(const UOp& sum_node) {
  const bool left_small = sum_node.src(0).op() != Op::Add && sum_node.src(1).op() == Op::Add;
  const std::vector<const UOp*> small = sum_terms(sum_node.src(left_small ? 0 : 1));
  auto is_op = [](Op op) { return [op](const UOp* t) { return scaled(*t).second.op() == op; }; };
  const bool small_mod = std::any_of(small.begin(), small.end(), is_op(Op::FloorMod));
  const bool small_div = std::any_of(small.begin(), small.end(), is_op(Op::FloorDiv));
  if (!small_mod && !small_div) return UOp();
  const Chain big = walk_chain(sum_node.src(left_small ? 1 : 0));
  auto index_of = [](const std::vector<const UOp*>& terms, const UOp& t) {
    for (size_t k = 0; k < terms.size(); ++k)
      if (*terms[k] == t) return k;
    return terms.size();
  };
  // a division d in small pairs with k*(x%c) only when d's numerator is x (or x's, x = z//c1)
  std::vector<const UOp*> numerators;
  for (const UOp* t : small) {
    const UOp& d = scaled(*t).second;
    if (d.op() == Op::FloorDiv) numerators.push_back(&d.src(0));
  }
  auto may_pair = [&](const UOp& m) {
    const UOp& x = m.src(0);
    for (const UOp* n : numerators)
      if (*n == x || (x.op() == Op::FloorDiv && *n == x.src(0))) return true;
    return false;
  };
  // (index in small, index in big, the combined term)
  auto find = [&]() -> std::tuple<size_t, size_t, UOp> {
    for (size_t i = 0; small_mod && i < small.size(); ++i) {
      for (const UOp& p : div_partners(*small[i])) {
        const size_t j = index_of(big.terms, p);
        if (j < big.terms.size()) return {i, j, combined_term(*small[i])};
      }
    }
    for (size_t j = 0; small_div && j < big.terms.size(); ++j) {
      const UOp& m = scaled(*big.terms[j]).second;
      if (m.op() != Op::FloorMod || !may_pair(m)) continue;
      for (const UOp& p : div_partners(*big.terms[j])) {
        const size_t i = index_of(small, p);
        if (i < small.size()) return {i, j, combined_term(*big.terms[j])};
      }
    }
    return {0, 0, UOp()};
  };
  auto [i, j, combined] = find();
  if (!combined) return UOp();
  // (the part below term j) + (big's terms above it, bottom up) + (small but term i) + k*x
  const UOp* rest = big.below(j);
  UOp out = rest ? *rest : UOp();
  auto append = [&](const UOp& t) { out = out ? out + t : t; };
  for (size_t k = j; k-- > 0;) append(*big.terms[k]);
  for (size_t k = 0; k < small.size(); ++k)
    if (k != i) append(*small[k]);
  append(combined);
  return out;
}

i128 lo(const UOp& u) { return u.vmin().i; }
i128 hi(const UOp& u) { return u.vmax().i; }

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

// A helper of UOps giving a UOp: none when f gives none or its arithmetic is inexact.
template <class... A>
Helper exact_helper(std::string name, UOp (*f)(A...), std::string doc) {
  Helper h = typed_helper(std::move(name), f, std::move(doc));
  h.fn = [inner = h.fn](RewriteContext& ctx, std::span<const Value> a) {
    return unless_inexact([&] { return inner(ctx, a); });
  };
  return h;
}

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

// The running rule set applied once to a node a rule builds (tinygrad's recursive call of
// fold_divmod_general): C++ because a rule cannot name its own rule set.
const HelperRegistrar kRewritten(typed_helper(
    "rewritten",
    +[](RewriteContext& ctx, const UOp& u) {
      if (!ctx.pm) return UOp();
      const RuleInfo* fired = nullptr;
      UOp r = ctx.pm->rewrite(u, ctx, &fired);
      return r == u ? UOp() : r;
    },
    "rewritten(u): u rewritten once by the running rule set (none when no rule fires)"));

// C++: an analysis (a total structural order on UOps), not a rewrite.
const HelperRegistrar kOrder(typed_helper(
    "sources_out_of_order",
    +[](const UOp& u) { return u.nsrc() == 2 && compare_uops(u.src(1), u.src(0)) < 0; },
    "sources_out_of_order(x): the two sources are not in canonical order"));

// The running rule set applied to a fixed point on a sub-expression (tinygrad's nested
// graph_rewrite in uop_given_valid): C++ because a rule cannot name its own rule set.
const HelperRegistrar kRewrittenFully(typed_helper(
    "rewritten_fully",
    +[](RewriteContext& ctx, const UOp& u) {
      return ctx.pm ? graph_rewrite(u, ctx.pm, {.name = "rewritten_fully"}) : UOp();
    },
    "rewritten_fully(u): u rewritten by the running rule set until no rule fires (u itself when "
    "none does; none without a running rule set)"));

// C++ (a rewrite, TODO(issue 12)): its bounded pair search over a chain keeps long sums linear.
const HelperRegistrar kCombine(
    exact_helper("combine_divmod_terms", combine_divmod_terms,
                 "combine_divmod_terms(sum): k*(x%c) + k*c*(x//c) terms become k*x"));

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

// Primitives and analyses of rules/symbolic.rw: the rewrites are rules there, over the analyses of
// sums and products on UOp (ir/terms.cpp). Some helpers here are rewrites still, each saying why
// at its registration (speed, a pair search that keeps long sums linear, the gate simplification's
// nested run of the rule set). All integer
// math is exact (Python floor semantics for // and %): a fold whose arithmetic would leave the
// exact 128-bit range, or use an unbounded (saturated) vmin/vmax, is not done.
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

// t == k * inner (k = 1 when t has no constant factor on the right).
std::pair<i128, UOp> scaled(const UOp& t) {
  if (t.op() == Op::Mul && t.src(1).is_const() && t.src(1).arg().is_int())
    return {t.src(1).arg().as_int(), t.src(0)};
  return {1, t};
}

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

i128 lo(const UOp& u) { return u.vmin().i; }
i128 hi(const UOp& u) { return u.vmax().i; }

UOp sum(const UOp& like, i128 start, const std::vector<std::pair<i128, UOp>>& terms) {
  UOp acc;
  for (const auto& [k, v] : terms) {
    if (k == 0) continue;
    UOp t = k == 1 ? v : v * k;
    acc = acc ? acc + t : t;
  }
  if (!acc) return like.const_like(start);
  return start == 0 ? acc : acc + like.const_like(start);
}

// x // c or x % c (c > 0) seen term by term: x = sum(factor_i * var_i) + constant, factor_i =
// quotient_i * c + remainder_i. The term rules below share it.
struct Decomposition {
  struct Term {
    i128 factor, quotient, remainder;
    UOp var;
  };
  std::vector<Term> terms;
  i128 c = 1, g = 1, div = 1, constant = 0, offset = 0;
  bool is_mod = false, changed = false;
};

// Empty when a term has no bounded variable part; throws Inexact past the exact range.
std::optional<Decomposition> decompose(const UOp& d) {
  const UOp& x = d.src(0);
  Decomposition D;
  D.c = D.g = d.src(1).arg().as_int();
  D.is_mod = d.op() == Op::FloorMod;
  const i128 c = D.c;
  for (const UOp& u : x.split(Op::Add)) {
    const i128 f = u.const_factor();
    UOp v = u.divides(f);
    if (!v) return std::nullopt;
    const auto [k, m] = scaled(u);
    i128 fn = 0;  // f*n, the period of f*(a % n)
    if (D.is_mod && k == f && m.op() == Op::FloorMod && m.src(1).op() == Op::Const &&
        m.src(1).arg().is_int() && exact_mul(f, m.src(1).arg().as_int(), fn) && fn != 0 &&
        floor_mod(fn, c) == 0 && (f == 1 || m.src(0).op() != Op::Add) &&
        lo(m.src(0)) > -kInfinity && hi(m.src(0)) < kInfinity) {
      // f*(a % n) and f*a differ by a multiple of f*n, so by one of c: (f*(a % n) + ...) % c ==
      // (f*a + ...) % c (a sum a is kept under its modulo when f != 1: f*a would grow, f times
      // each of its terms)
      v = m.src(0);
      D.changed = true;
    }
    const i128 q = floor_div(f, c), r = floor_mod(f, c);
    if (r == 0 || ((D.is_mod || u.op() == Op::Const) && r != f)) D.changed = true;
    if (lo(v) <= -kInfinity || hi(v) >= kInfinity) return std::nullopt;
    D.offset = add(D.offset, mul(r, lo(v)));
    if (u.op() == Op::Const) {
      D.constant = add(D.constant, f);
    } else {
      if (f > 1 && c % f == 0 && (D.div == 1 || D.div > f)) D.div = f;
      D.g = gcd(r, D.g);
      D.terms.push_back({f, q, r, v});
    }
  }
  D.offset = floor_mod(D.offset, c);
  if (D.g != 1) D.changed = true;
  return D;
}

// x is congruent (mod c) to an expression within [0, c): the modulo (or division) drops out.
UOp fold_divmod_congruence(const UOp& d) {
  const auto D = decompose(d);
  if (!D) return UOp();
  const i128 c = D->c;
  i128 lbound = D->offset, ubound = D->offset, off = D->offset;
  for (const Decomposition::Term& t : D->terms) {
    i128 r = t.remainder;
    if (r > c / 2) {
      r -= c;
      lbound = add(lbound, mul(r, sub(hi(t.var), lo(t.var))));
      if (lbound < 0) return UOp();
    } else {
      ubound = add(ubound, mul(r, sub(hi(t.var), lo(t.var))));
      if (ubound >= c) return UOp();
    }
    off = sub(off, mul(r, lo(t.var)));
  }
  std::vector<std::pair<i128, UOp>> out;
  for (const Decomposition::Term& t : D->terms) {
    const i128 r = std::abs(static_cast<long double>(t.remainder - c)) <
                           std::abs(static_cast<long double>(t.remainder))
                       ? t.remainder - c
                       : t.remainder;
    out.emplace_back(D->is_mod ? r : floor_div(sub(t.factor, r), c), t.var);
  }
  return D->is_mod ? sum(d, off, out) : sum(d, floor_div(sub(D->constant, off), c), out);
}

// Quotient and remainder parts: x//c = quo + rem//(c/g), x%c = g*(rem % (c/g)) + const%g, where
// g divides every remainder; only when that changes something (a term leaves, g > 1, a nested
// modulo drops).
UOp fold_quotient_remainder(const UOp& d) {
  const auto D = decompose(d);
  if (!D || !D->changed) return UOp();
  const i128 c = D->c, g = D->g;
  std::vector<std::pair<i128, UOp>> quo, rem;
  for (const Decomposition::Term& t : D->terms) {
    if (!D->is_mod && t.remainder != 0) {
      rem.emplace_back(t.factor / g, t.var);
    } else {
      rem.emplace_back(t.remainder / g, t.var);
      quo.emplace_back(t.quotient, t.var);
    }
  }
  const UOp r = sum(d, floor_div(floor_mod(D->constant, c), g), rem);
  if (D->is_mod) {
    UOp m = r.floormod(c / g);
    if (g != 1) m = m * g;
    const i128 k = floor_mod(D->constant, g);
    return k ? m + k : m;
  }
  const UOp q = sum(d, floor_div(D->constant, c), quo);
  const UOp div = r.floordiv(c / g);
  return q.is_const() && q.arg().as_int() == 0 ? div : div + q;
}

// The factor f (1 < f < c, f | c) of a term that x//c may be nested by, when the term rules above
// change nothing; 1 otherwise.
i128 nest_factor(const UOp& d) {
  const auto D = decompose(d);
  return !D || D->changed || D->is_mod || D->div >= D->c ? 1 : D->div;
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

// ---- valid (gate) simplification

struct Bound {
  UOp var;
  i128 lo, hi;
};

// Collects per-variable bounds implied by a conjunction of `v < c`, `c < v` and `!(v < c)`.
void collect_bounds(const UOp& valid, std::vector<Bound>& out) {
  std::vector<UOp> clauses{valid};
  while (!clauses.empty()) {
    UOp c = clauses.back();
    clauses.pop_back();
    if (c.op() == Op::And && c.dtype().is_bool()) {
      clauses.push_back(c.src(0));
      clauses.push_back(c.src(1));
      continue;
    }
    auto bound = [&](const UOp& v, i128 l, i128 h) {
      if (v.op() != Op::DefineVar) return;
      for (Bound& b : out)
        if (b.var == v) {
          b.lo = std::max(b.lo, l);
          b.hi = std::min(b.hi, h);
          return;
        }
      out.push_back({v, std::max(l, lo(v)), std::min(h, hi(v))});
    };
    // only integer comparisons bound a variable; a float compare says nothing about an index
    const bool int_compare = c.op() == Op::CmpLt && c.src(0).dtype().is_int();
    const bool negated_compare =
        c.op() == Op::CmpNe && c.src(0).op() == Op::CmpLt && c.src(0).src(0).dtype().is_int();
    if (int_compare && c.src(1).is_const())
      bound(c.src(0), -kInfinity, sub(c.src(1).arg().as_int(), 1));
    if (int_compare && c.src(0).is_const())
      bound(c.src(1), add(c.src(0).arg().as_int(), 1), kInfinity);
    if (negated_compare && c.src(1).is_const() && c.src(1).arg() == Arg::boolean(true) &&
        c.src(0).src(1).is_const()) {
      bound(c.src(0).src(0), c.src(0).src(1).arg().as_int(), kInfinity);
    }
  }
}

// x simplified under the assumption that `valid` holds, or empty when that changes nothing.
UOp simplify_given_valid(RewriteContext& ctx, const UOp& valid, const UOp& x) {
  std::vector<Bound> bounds;
  collect_bounds(valid, bounds);
  std::unordered_map<UOp, UOp> narrow, back;
  for (const Bound& b : bounds) {
    if (b.lo > b.hi || (b.lo == lo(b.var) && b.hi == hi(b.var))) continue;
    const std::string name = b.var.arg().items()[0].as_string();
    const UOp nv = UOp::variable(name, b.lo, b.hi, b.var.dtype()).with_tag(Arg::string("valid"));
    narrow.emplace(b.var, nv);
    back.emplace(nv, b.var);
  }
  if (narrow.empty() || !ctx.pm) return UOp();
  const UOp simplified =
      graph_rewrite(substitute(x, narrow), ctx.pm, {.name = "simplify_given_valid"});
  const UOp out = substitute(simplified, back);
  return out == x ? UOp() : out;
}

// ---- guards

// Whether evaluating x may fail in Python: a division or modulo whose divisor's range holds 0, a
// shift whose count's range holds a negative number. Such an x must stay under the condition that
// guards it.
bool may_raise(const UOp& x) {
  for (const UOp& u : toposort(x)) {
    switch (u.op()) {
      case Op::FloorDiv:
      case Op::FloorMod:
      case Op::CDiv:
      case Op::CMod:
        if (u.src(1).vmin().i <= 0 && u.src(1).vmax().i >= 0) return true;
        break;
      case Op::Shl:
      case Op::Shr:
        if (u.src(1).vmin().i < 0) return true;
        break;
      default:
        break;
    }
  }
  return false;
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

// C++ for now (a rewrite, TODO(issue 12)): written in .rw over the UOp analyses it gives the same
// outputs but costs +35% compiled on bench_symbolic, in the generated code's generic value ops.
const HelperRegistrar kCongruence(exact_helper(
    "fold_divmod_congruence", fold_divmod_congruence,
    "fold_divmod_congruence(d): x//c or x%c (c > 0) without the division, when x is congruent "
    "mod c to a sum within [0, c)"));

// C++ for now, as fold_divmod_congruence.
const HelperRegistrar kQuotientRemainder(
    exact_helper("fold_quotient_remainder", fold_quotient_remainder,
                 "fold_quotient_remainder(d): x//c or x%c (c > 0) split into the multiples of c "
                 "and the remainder by the gcd of the remainders (none when nothing changes)"));

// C++ for now, as fold_divmod_congruence (an analysis of the same walk).
const HelperRegistrar kNestFactor(typed_helper(
    "nest_factor",
    +[](const UOp& d) {
      try {
        return nest_factor(d);
      } catch (const Inexact&) {
        return i128{1};
      }
    },
    "nest_factor(d): for x//c, a factor f of c (1 < f < c) of a term of x by which x//c may be "
    "nested as (x//f)//(c/f); 1 when none"));

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

// C++: an analysis (bounds a gate implies) plus a nested run of the rule set, not one rewrite.
const HelperRegistrar kValid(
    exact_helper("simplify_given_valid", simplify_given_valid,
                 "simplify_given_valid(valid, x): x simplified where valid holds"));

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

// C++: an analysis (a walk over the whole expression).
const HelperRegistrar kMayRaise(typed_helper(
    "may_raise", +[](const UOp& x) { return may_raise(x); },
    "may_raise(x): evaluating x may fail (a division or modulo by a range holding 0, a shift by a "
    "range holding a negative count)"));

}  // namespace
}  // namespace tinyrw::rw

// Analyses of sums and products (UOp::split, const_factor, divides, divide_exact, pop_const,
// spine): structural facts, not rewrites; the rules of rules/symbolic.rw decide what to build from
// them.
#include <algorithm>

#include "ir/uop.h"

namespace tinyrw {

std::vector<UOp> UOp::split(Op sep) const {
  std::vector<UOp> out;
  std::vector<const UOp*> stack{this};  // iterative: a sum may be a million terms long
  while (!stack.empty()) {
    const UOp* u = stack.back();
    stack.pop_back();
    if (u->op() == sep) {
      stack.push_back(&u->src(1));
      stack.push_back(&u->src(0));
    } else {
      out.push_back(*u);
    }
  }
  return out;
}

namespace {
// The known integer factor of one term: a CONST, or the CONST source of a MUL.
i128 term_factor(const UOp& t) {
  if (t.op() == Op::Const && t.arg().is_int()) return t.arg().as_int();
  if (t.op() == Op::Mul) {
    if (t.src(0).op() == Op::Const && t.src(0).arg().is_int()) return t.src(0).arg().as_int();
    if (t.src(1).op() == Op::Const && t.src(1).arg().is_int()) return t.src(1).arg().as_int();
  }
  return 1;
}

UOp divides_at(const UOp& u, i128 v, int depth) {
  if (v == 1) return u;
  if (depth > kMaxDivideDepth || v == 0) return UOp();
  if (u.op() == Op::Const && u.arg().is_int()) {
    const i128 a = u.arg().as_int();
    return floor_mod(a, v) == 0 ? u.const_like(floor_div(a, v)) : UOp();
  }
  if (u.op() == Op::Add) {
    UOp a = divides_at(u.src(0), v, depth + 1);
    if (!a) return UOp();
    UOp b = divides_at(u.src(1), v, depth + 1);
    return b ? a + b : UOp();
  }
  if (u.op() == Op::Mul) {
    if (UOp a = divides_at(u.src(0), v, depth + 1)) return a * u.src(1);
    if (UOp b = divides_at(u.src(1), v, depth + 1)) return u.src(0) * b;
  }
  // a variable whose values are multiples of m: exactly u // v where v divides m
  if (u.op() == Op::DefineVar && u.arg().items().size() > 3 &&
      floor_mod(u.arg().items()[3].as_int(), v) == 0)
    return u.floordiv(v);
  return UOp();
}
}  // namespace

i128 UOp::const_factor() const {
  if (op() != Op::Add) return term_factor(*this);
  i128 g = 0;
  for (const UOp& t : split(Op::Add)) g = gcd(g, term_factor(t));
  return g;
}

UOp UOp::divides(i128 v) const { return divides_at(*this, v, 0); }

UOp UOp::divide_exact(const UOp& y) const {
  if (*this == y) return const_like(static_cast<i128>(1));
  i128 coeff = 1;
  std::vector<UOp> rest;
  for (const UOp& f : split(Op::Mul)) {
    if (f.is_const() && f.arg().is_int()) {
      if (!exact_mul(coeff, f.arg().as_int(), coeff)) return UOp();
    } else {
      rest.push_back(f);
    }
  }
  for (const UOp& d : y.split(Op::Mul)) {
    if (d.is_const() && d.arg().is_int()) {
      const i128 k = d.arg().as_int();
      if (k == 0 || floor_mod(coeff, k) != 0) return UOp();
      coeff /= k;
      continue;
    }
    auto it = std::find(rest.begin(), rest.end(), d);
    if (it == rest.end()) return UOp();
    rest.erase(it);
  }
  UOp out;
  for (const UOp& f : rest) out = out ? out * f : f;
  if (!out) return const_like(coeff);
  return coeff == 1 ? out : out * coeff;
}

std::pair<UOp, Arg> UOp::pop_const(Op sep) const {
  if (op() == sep && src(1).is_const()) return {src(0), src(1).arg()};
  if (sep == Op::Add) return {*this, Arg::integer(0)};
  if (sep == Op::Mul) return {*this, Arg::integer(1)};
  return {*this, Arg()};
}

std::vector<UOp> UOp::spine(Op sep, size_t limit) const {
  std::vector<UOp> out;
  const UOp* u = this;
  while (out.size() < limit) {
    out.push_back(*u);
    if (u->op() != sep) break;
    // (where both sources are `sep` nodes, the chain goes on down src 0, src 1 its term)
    u = &u->src(u->src(1).op() == sep && u->src(0).op() != sep ? 1 : 0);
  }
  return out;
}

std::vector<UOp> UOp::chain_terms(Op sep, size_t limit) const {
  std::vector<UOp> sp = spine(sep, limit);
  for (size_t k = 0; k + 1 < sp.size(); ++k) {
    UOp term = sp[k].src(sp[k].src(0) == sp[k + 1] ? 1 : 0);  // a copy: sp[k] is overwritten
    sp[k] = std::move(term);
  }
  return sp;  // the last node is a term itself
}

}  // namespace tinyrw

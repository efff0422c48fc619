#include "compiler/prove_model.h"

#include <set>

#include <fmt/format.h>

#include "ir/int128.h"

namespace tinyrw::rw::prove {

SVal sbool(const z3::expr& e) {
  SVal v;
  v.k = SVal::K::Bool;
  v.e = e;
  return v;
}
SVal sint(const z3::expr& e) {
  SVal v;
  v.k = SVal::K::Int;
  v.e = e;
  return v;
}
SVal snode(SNode* n) {
  SVal v;
  v.k = SVal::K::Node;
  v.u = n;
  return v;
}

namespace {

bool is_div(Op op) {
  return op == Op::FloorDiv || op == Op::FloorMod || op == Op::CDiv || op == Op::CMod;
}
bool is_cmp(Op op) { return op == Op::CmpLt || op == Op::CmpNe || op == Op::CmpEq; }
// the bits of an int dtype, for bitwise ops (index: the 128 bits of the exact range)
unsigned width(DType d) { return d.is_index() ? 128u : static_cast<unsigned>(d.itemsize() * 8); }
bool is_false(const z3::expr& e) { return e.simplify().is_false(); }
bool is_true(const z3::expr& e) { return e.simplify().is_true(); }
i128 parse_i128(const std::string& s) {
  i128 v = 0;
  const bool neg = !s.empty() && s[0] == '-';
  for (size_t i = neg ? 1 : 0; i < s.size(); ++i) v = v * 10 + (s[i] - '0');
  return neg ? -v : v;
}
SVal unknown_op() {
  SVal v;
  v.k = SVal::K::Op;
  v.s = "?";  // a leaf's op: any
  return v;
}

}  // namespace

// ---- the model's nodes
// ------------------------------------------------------------------------------

z3::expr Model::int_val(i128 v) { return c_.int_val(to_string(v).c_str()); }
z3::expr Model::fresh_int(const std::string& hint) {
  return c_.int_const(fmt::format("{}!{}", hint, fresh_++).c_str());
}
z3::expr Model::bool01(const z3::expr& b) { return z3::ite(b, c_.int_val(1), c_.int_val(0)); }
z3::expr Model::fresh_bool(const std::string& hint) {
  return c_.bool_const(fmt::format("{}!{}", hint, fresh_++).c_str());
}
z3::expr Model::is_infinite(const z3::expr& v) {
  return v >= int_val(kInfinity) || v <= int_val(-kInfinity);
}
z3::expr Model::saturate(const z3::expr& v) {
  return z3::ite(v >= int_val(kInfinity), int_val(kInfinity),
                 z3::ite(v <= int_val(-kInfinity), int_val(-kInfinity), v));
}
// ir/int128.h's sat_add and sat_mul: an infinite operand stays infinite
z3::expr Model::sat_add(const z3::expr& a, const z3::expr& b) {
  return z3::ite(is_infinite(a), saturate(a),
                 z3::ite(is_infinite(b), saturate(b), saturate(a + b)));
}
z3::expr Model::sat_mul(const z3::expr& a, const z3::expr& b) {
  const z3::expr inf = int_val(kInfinity);
  const z3::expr neg = (a < 0) != (b < 0);
  return z3::ite(
      a == 0 || b == 0, c_.int_val(0),
      z3::ite(is_infinite(a) || is_infinite(b), z3::ite(neg, -inf, inf), saturate(a * b)));
}
z3::expr Model::in_dtype(DType d, const z3::expr& v) {
  if (d.is_index()) return c_.bool_val(true);
  return v >= int_val(d.int_min()) && v <= int_val(d.int_max());
}
// Python's floor division and modulo (Z3's div is Euclidean: floor only for a positive divisor).
// Z3's division (Euclidean: floor for a positive divisor), or, with quotient_vars, for a
// symbolic divisor a quotient q with a = b*q + r and r between 0 and b (exclusive): each form
// proves rules the other's query runs out of resources on.
z3::expr Model::floor_div(const z3::expr& a, const z3::expr& b) {
  const z3::expr bs = b.simplify();
  if (bs.is_numeral()) return z3::ite(b > 0, a / b, (-a) / (-b));
  symbolic_division_ = true;
  const std::string key = fmt::format("{} {}", a.id(), b.id());
  if (auto it = quotients_.find(key); it != quotients_.end()) return it->second;
  const z3::expr q = quotient_vars_ ? fresh_int("q") : z3::ite(b > 0, a / b, (-a) / (-b));
  // what floor division is, stated for the quotient (the remainder lies between 0 and b), and
  // lemmas of it that Z3's nonlinear arithmetic does not find alone: a quotient is 0 where |a|
  // is below |b| and has a's sign, and is no further from 0 than a
  const z3::expr r = a - b * q;
  axioms_.push_back(z3::implies(b > 0, r >= 0 && r < b));
  axioms_.push_back(z3::implies(b < 0, r <= 0 && r > b));
  axioms_.push_back(z3::implies((b > 0 && a >= 0 && a < b) || (b < 0 && a <= 0 && a > b), q == 0));
  axioms_.push_back(z3::implies(b > 0 && a >= 0, q >= 0 && q <= a));
  axioms_.push_back(z3::implies(b > 0 && a < 0, q < 0 && q >= a));
  axioms_.push_back(z3::implies(b < 0 && a > 0, q < 0 && q >= -a));
  axioms_.push_back(z3::implies(b < 0 && a <= 0, q >= 0 && q <= -a));
  quotients_.emplace(key, q);
  return q;
}
z3::expr Model::floor_mod(const z3::expr& a, const z3::expr& b) { return a - b * floor_div(a, b); }

// rep wrapped to d's width as a function of rep alone, (rep - min) mod 2^w + min, so equal reps
// give one term (index and bool are never wrapped here)
z3::expr Model::wrap(DType d, const z3::expr& rep) {
  if (d.is_index() || d.is_bool()) return rep;
  const z3::expr lo = int_val(d.int_min());
  return z3::mod(rep - lo, int_val(static_cast<i128>(1) << width(d))) + lo;
}

z3::expr Model::bits(SNode* n) {
  if (n->bv) return *n->bv;
  const unsigned w = width(n->dtype);
  if (n->leaf) {  // a capture: its bits are the unknown, its value their integer
    n->bv = c_.bv_const(fmt::format("{}.bits!{}", n->name, fresh_++).c_str(), w);
    axioms_.push_back(n->val == z3::bv2int(*n->bv, !n->dtype.is_unsigned()));
    return *n->bv;
  }
  if (n->op == Op::Where && !n->ite)  // the bits of the branch taken
    return z3::ite((n->src[0]->val != 0).simplify(), bits(n->src[1]), bits(n->src[2]));
  return z3::int2bv(w, n->rep);  // int2bv takes rep mod 2^w: the same bits as val's
}

// vmin/vmax: any bounds that hold the value (and, for a sized int, the dtype's range); finite
// for an index node when neither bound is the saturated infinity
void Model::bounds(SNode* n) {
  n->vmin = fresh_int("vmin");
  n->vmax = fresh_int("vmax");
  axioms_.push_back(n->vmin <= n->val && n->val <= n->vmax);
  if (n->dtype.is_index()) {
    n->finite = fresh_bool("finite");
    axioms_.push_back(z3::implies(n->finite, !is_infinite(n->vmin) && !is_infinite(n->vmax)));
  } else if (n->dtype.is_bool()) {  // the IR does not clamp a bool's range (Add of bools: [0, 2])
    n->finite = c_.bool_val(true);
  } else {
    axioms_.push_back(in_dtype(n->dtype, n->vmin) && in_dtype(n->dtype, n->vmax));
    n->finite = c_.bool_val(true);
  }
}

SNode* Model::leaf(DType d, const std::string& name) {
  SNode* n = &nodes_.emplace_back(c_);
  n->id = static_cast<int>(nodes_.size());
  n->leaf = true;
  n->dtype = d;
  n->name = name;
  // a bool is 0 or 1 by a Z3 bool (an int compared with 0 in a condition slows bit-vector
  // queries down by orders of magnitude)
  if (d.is_bool()) bool_leaves_.push_back(fresh_bool(name));
  n->val = n->rep = d.is_bool() ? bool01(bool_leaves_.back()) : fresh_int(name);
  // a value of the dtype (index: an i128 short of the saturated infinity)
  axioms_.push_back(d.is_index() ? !is_infinite(n->val) : in_dtype(d, n->val));
  n->def = fresh_bool(name + ".defined");
  n->may_wrap = fresh_bool(name + ".may_wrap");
  n->may_raise = fresh_bool(name + ".may_raise");
  axioms_.push_back(z3::implies(!n->may_raise, n->def));
  bounds(n);
  return n;
}

void Model::const_facts(SNode* n) {
  if (n->is_const) return;
  n->is_const = n->other ? c_.bool_val(false) : fresh_bool(n->name + ".is_const");
  n->arg_none = fresh_bool(n->name + ".arg_none");
  // a constant with a none arg is Invalid, which only an index has, and is undefined
  axioms_.push_back(z3::implies(*n->is_const && *n->arg_none, !n->def));
  if (!n->dtype.is_index()) axioms_.push_back(z3::implies(*n->is_const, !*n->arg_none));
}

SNode* Model::constant(DType d, const z3::expr& value) {
  const std::string key = fmt::format("C {} {}", d.repr(), value.simplify().to_string());
  if (auto it = consed_.find(key); it != consed_.end()) return it->second;
  SNode* n = &nodes_.emplace_back(c_);
  n->id = static_cast<int>(nodes_.size());
  n->op = Op::Const;
  n->dtype = d;
  n->arg = value;
  n->val = n->rep = value;
  n->def = c_.bool_val(true);
  n->vmin = n->vmax = value;
  n->finite = d.is_index() ? !is_infinite(value) : c_.bool_val(true);
  n->may_wrap = n->may_raise = c_.bool_val(false);
  consed_[key] = n;
  return n;
}

SNode* Model::constant_of(DType d, const z3::expr& v) {
  if (d.is_bool()) return constant(d, z3::ite(v != 0, c_.int_val(1), c_.int_val(0)));
  if (!d.is_int()) throw Unsupported(fmt::format("a constant of {} is not modelled", d.repr()));
  if (d.is_index()) return constant(d, v);
  // wrapped to the width as truncate_int does: (v - min) mod 2^w + min
  const z3::expr m = int_val(static_cast<i128>(1) << width(d));
  const z3::expr lo = int_val(d.int_min());
  return constant(d, floor_mod(v - lo, m) + lo);
}

SNode* Model::invalid(DType d) {
  const std::string key = "Invalid " + d.repr();
  if (auto it = consed_.find(key); it != consed_.end()) return it->second;
  SNode* n = &nodes_.emplace_back(c_);
  n->id = static_cast<int>(nodes_.size());
  n->op = Op::Const;
  n->dtype = d;
  n->invalid = true;
  n->val = n->rep = fresh_int("invalid");
  n->def = c_.bool_val(false);
  n->vmin = fresh_int("vmin");
  n->vmax = fresh_int("vmax");
  n->finite = c_.bool_val(false);
  n->may_wrap = c_.bool_val(false);
  n->may_raise = c_.bool_val(true);
  consed_[key] = n;
  return n;
}

SNode* Model::select(const z3::expr& cond, SNode* a, SNode* b) {
  if (is_true(cond) || a == b) return a;
  if (is_false(cond)) return b;
  if (a->dtype != b->dtype) throw Unsupported("select() of nodes of different dtypes");
  SNode* n = &nodes_.emplace_back(c_);
  n->id = static_cast<int>(nodes_.size());
  n->ite = true;
  n->dtype = a->dtype;
  n->val = n->rep = z3::ite(cond, a->val, b->val);
  n->def = z3::ite(cond, a->def, b->def);
  n->vmin = z3::ite(cond, a->vmin, b->vmin);
  n->vmax = z3::ite(cond, a->vmax, b->vmax);
  n->finite = z3::ite(cond, a->finite, b->finite);
  n->may_wrap = z3::ite(cond, a->may_wrap, b->may_wrap);
  n->may_raise = z3::ite(cond, a->may_raise, b->may_raise);
  return n;
}

SNode* Model::build(Op op, std::vector<SNode*> src) {
  if (src.empty()) throw Unsupported(fmt::format("{} of no sources", op_name(op)));
  const DType a = src[0]->dtype;
  DType d = a;
  if (is_cmp(op)) {
    d = dtypes::bool_;
  } else if (op == Op::Where) {
    if (src.size() != 3 || !src[0]->dtype.is_bool() || src[1]->dtype != src[2]->dtype)
      throw Unsupported("a WHERE that does not type");
    d = src[1]->dtype;
  }
  return alu(op, d, std::move(src));
}

SNode* Model::alu(Op op, DType d, std::vector<SNode*> src) {
  const OpInfo& info = op_info(op);
  if (!info.is_alu() && op != Op::Cast && op != Op::Bitcast)
    throw Unsupported(fmt::format("{} is not an ALU op", op_name(op)));
  if (!info.accepts_arity(static_cast<int>(src.size())))
    throw Unsupported(fmt::format("{} of {} sources", op_name(op), src.size()));
  if (!d.is_int() && !d.is_bool())
    throw Unsupported(fmt::format("{} of dtype {} (only int, index and bool are modelled)",
                                  op_name(op), d.repr()));
  if (op == Op::Where && (!src[0]->dtype.is_bool() || src[1]->dtype != d || src[2]->dtype != d))
    throw Unsupported("a WHERE that does not type");
  std::string key = fmt::format("{} {}", op_name(op), d.repr());
  for (SNode* s : src) key += fmt::format(" {}", s->id);
  if (auto it = consed_.find(key); it != consed_.end()) return it->second;

  auto v = [&](size_t i) { return src[i]->val; };
  auto r = [&](size_t i) { return src[i]->rep; };
  const DType s0 = src[0]->dtype;
  const z3::expr zero = c_.int_val(0);
  auto b01 = [&](const z3::expr& b) { return bool01(b); };
  z3::expr defined = c_.bool_val(true);
  for (SNode* s : src) defined = defined && s->def;
  std::optional<z3::expr> exact;  // before wrap-around; value: already in the dtype
  std::optional<z3::expr> ring;   // with exact: a rep of it (SNode::rep), from the sources' reps
  std::optional<z3::expr> value;
  std::optional<z3::expr> bv;            // bitwise ops: the value's bits
  z3::expr raises = c_.bool_val(false);  // this node may divide by zero (for may_raise)
  if (op != Op::Cast && op != Op::Bitcast && op != Op::Where && !is_cmp(op))
    for (SNode* x : src)
      if (x->dtype != d && !(op == Op::Shl || op == Op::Shr || is_div(op)))
        throw Unsupported(fmt::format("{} of mixed dtypes", op_name(op)));
  if (d.is_bool() && !is_cmp(op) && op != Op::Where && op != Op::Cast && op != Op::Bitcast) {
    switch (op) {  // bools are logic (exec_alu)
      case Op::And:
      case Op::Mul:
        value = b01(v(0) != 0 && v(1) != 0);
        break;
      case Op::Or:
      case Op::Add:
      case Op::Max:
        value = b01(v(0) != 0 || v(1) != 0);
        break;
      case Op::Xor:
        value = b01((v(0) != 0) != (v(1) != 0));
        break;
      default:
        throw Unsupported(fmt::format("{} of bools is undefined", op_name(op)));
    }
  } else {
    switch (op) {
      case Op::Add:
        exact = v(0) + v(1);
        ring = r(0) + r(1);
        break;
      case Op::Sub:
        exact = v(0) - v(1);
        ring = r(0) - r(1);
        break;
      case Op::Mul:
        exact = v(0) * v(1);
        ring = r(0) * r(1);
        break;
      case Op::MulAcc:
        exact = v(0) * v(1) + v(2);
        ring = r(0) * r(1) + r(2);
        break;
      case Op::Neg:
        exact = -v(0);
        ring = -r(0);
        break;
      case Op::Trunc:
        value = v(0);
        break;
      case Op::Max:
        value = z3::ite(v(0) >= v(1), v(0), v(1));
        break;
      case Op::FloorDiv:
      case Op::FloorMod:
      case Op::CDiv:
      case Op::CMod: {
        defined = defined && v(1) != 0;
        raises = fresh_bool("raises");
        axioms_.push_back(z3::implies(!raises, src[1]->vmin > 0 || src[1]->vmax < 0));
        const z3::expr a = v(0), b = v(1);
        if (op == Op::FloorDiv) exact = floor_div(a, b);
        if (op == Op::FloorMod) value = floor_mod(a, b);  // |a % b| < |b|: never wraps
        // C's: the quotient rounds toward zero, the remainder takes the dividend's sign
        const z3::expr q = z3::ite(a >= 0, z3::ite(b > 0, a / b, -(a / (-b))),
                                   z3::ite(b > 0, -((-a) / b), (-a) / (-b)));
        if (op == Op::CDiv) exact = q;
        if (op == Op::CMod) value = a - b * q;
        break;
      }
      case Op::Shl:
      case Op::Shr: {
        defined = defined && v(1) >= 0 && v(1) < 127;
        raises = fresh_bool("raises");
        axioms_.push_back(z3::implies(!raises, src[1]->vmin >= 0 && src[1]->vmax < 127));
        // a sized int shifted by a symbolic amount: the bit-vector shift (bits shifted out are
        // the wrap-around; an arithmetic right shift floors); else 2^b as a chain of cases
        if (!d.is_index() && !v(1).simplify().is_numeral()) {
          const unsigned w = width(d);
          // the amount's bits where it has the width (no int-to-bits conversion for Z3 to solve)
          const z3::expr x = bits(src[0]);
          const z3::expr k =
              width(src[1]->dtype) == w && !src[1]->dtype.is_bool() && !src[1]->dtype.is_index()
                  ? bits(src[1])
                  : z3::int2bv(w, v(1));
          bv = op == Op::Shl ? z3::shl(x, k) : d.is_unsigned() ? z3::lshr(x, k) : z3::ashr(x, k);
          value = z3::bv2int(*bv, !d.is_unsigned());
          break;
        }
        z3::expr p = int_val(static_cast<i128>(1) << 126);
        for (int k = 125; k >= 0; --k)
          p = z3::ite(v(1) == k, int_val(static_cast<i128>(1) << k), p);
        exact = op == Op::Shl ? v(0) * p : floor_div(v(0), p);
        if (op == Op::Shl) ring = r(0) * p;
        break;
      }
      case Op::And:
      case Op::Or:
      case Op::Xor: {
        // exact identities first (x op x, x op 0): the bit-vector encoding is slow for Z3
        const bool same = src[0] == src[1];
        auto zero_const = [&](size_t i) {
          return src[i]->op == Op::Const && !src[i]->leaf && is_true(src[i]->val == 0);
        };
        if (same) {
          value = op == Op::Xor ? zero : v(0);
          break;
        }
        if (zero_const(0) || zero_const(1)) {
          const z3::expr other = zero_const(0) ? v(1) : v(0);
          value = op == Op::And ? zero : other;
          break;
        }
        // an index beyond the 128 bits the IR holds: not modelled (undefined)
        if (d.is_index()) defined = defined && !is_infinite(v(0)) && !is_infinite(v(1));
        const z3::expr x = bits(src[0]), y = bits(src[1]);
        bv = op == Op::And ? (x & y) : op == Op::Or ? (x | y) : (x ^ y);
        value = z3::bv2int(*bv, !d.is_unsigned());
        break;
      }
      case Op::CmpLt:
        value = b01(v(0) < v(1));
        break;
      case Op::CmpNe:
        value = b01(v(0) != v(1));
        break;
      case Op::CmpEq:
        value = b01(v(0) == v(1));
        break;
      case Op::Where: {
        const z3::expr cond = (v(0) != 0).simplify();
        value = z3::ite(cond, v(1), v(2));
        if (src[1]->bv && src[2]->bv) bv = z3::ite(cond, *src[1]->bv, *src[2]->bv);
        defined = src[0]->def && z3::ite(cond, src[1]->def, src[2]->def);
        break;
      }
      case Op::ThreeFry: {  // random bits: some function of the two sources
        const z3::sort i = c_.int_sort();
        const z3::func_decl f = z3::function("threefry", i, i, i);
        value = f(v(0), v(1));
        axioms_.push_back(in_dtype(d, *value));
        break;
      }
      case Op::Cast:
      case Op::Bitcast:
        if (op == Op::Bitcast && s0 != d &&
            (s0.is_bool() || d.is_bool() || s0.is_index() || d.is_index() ||
             s0.itemsize() != d.itemsize())) {
          // bytes of another size or kind: some function of the source
          const z3::sort i = c_.int_sort();
          value =
              z3::function(fmt::format("bitcast_{}_{}", s0.name(), d.name()).c_str(), i, i)(v(0));
          axioms_.push_back(in_dtype(d, *value));
          break;
        }
        if (d.is_bool()) {
          value = b01(v(0) != 0);
        } else {
          exact = v(0);
          // to a sized int no wider than the source's: wrapping the source's rep is the same
          if (!s0.is_bool() && !s0.is_index() && !d.is_index() && width(d) <= width(s0))
            ring = r(0);
        }
        break;
      default:
        throw Unsupported(fmt::format("{} is not modelled", op_name(op)));
    }
  }
  SNode* n = &nodes_.emplace_back(c_);
  n->id = static_cast<int>(nodes_.size());
  n->op = op;
  n->dtype = d;
  n->src = std::move(src);
  n->def = defined;
  z3::expr wrapped = c_.bool_val(false);
  if (exact) {
    n->rep = ring ? *ring : *exact;
    n->val = wrap(d, n->rep);
    if (!d.is_index() && !d.is_bool()) {
      wrapped = !in_dtype(d, *exact);
      axioms_.push_back(z3::implies(!wrapped, n->val == *exact));
    }
  } else {
    n->val = n->rep = *value;
  }
  n->bv = bv;
  // may_wrap as the IR computes it (ir/properties.cpp): a CAST's is false; an ALU node's is a
  // source's or its own, and its own is false only where its value did not wrap, for the ops whose
  // wrap-around the IR detects (sums, products, maxima, a division whose divisor's range excludes
  // 0, a shift by a constant in [0, 120))
  const z3::expr own = fresh_bool("wraps");
  const auto numeral_in = [&](size_t i, int lo, int hi) {
    const z3::expr b = n->src[i]->val.simplify();
    return b.is_numeral() && b.get_numeral_int64() >= lo && b.get_numeral_int64() < hi;
  };
  if (op == Op::Add || op == Op::Sub || op == Op::Mul || op == Op::Max)
    axioms_.push_back(z3::implies(!own, !wrapped));
  else if (op == Op::FloorDiv || op == Op::CDiv)
    axioms_.push_back(z3::implies(!own && (n->src[1]->vmin > 0 || n->src[1]->vmax < 0), !wrapped));
  else if ((op == Op::Shl || op == Op::Shr) && numeral_in(1, 0, 120))
    axioms_.push_back(z3::implies(!own, !wrapped));
  n->may_raise = raises;
  if (op == Op::Cast || op == Op::Bitcast) {
    n->may_wrap = c_.bool_val(false);
  } else {
    n->may_wrap = own;
    for (SNode* s : n->src) n->may_wrap = n->may_wrap || s->may_wrap;
  }
  for (SNode* s : n->src) n->may_raise = n->may_raise || s->may_raise;
  bounds(n);
  consed_[key] = n;
  return n;
}

// ---- the evaluator
// ----------------------------------------------------------------------------------

void Evaluator::bind(int slot, SVal v) {
  if (slots_.size() < rule_.slot_names.size()) slots_.resize(rule_.slot_names.size());
  slots_.at(static_cast<size_t>(slot)) = std::move(v);
}

z3::expr Evaluator::run_steps() {
  if (slots_.size() < rule_.slot_names.size()) slots_.resize(rule_.slot_names.size());
  z3::expr path = m_.ctx().bool_val(true);
  for (const Step& st : rule_.steps) {
    pc_ = path;
    SVal v = eval(st.expr, slots_);
    if (st.is_let) {
      slots_[static_cast<size_t>(st.slot)] = std::move(v);
      continue;
    }
    const z3::expr t = truth(v);
    if (is_false(t)) throw Vacuous{};
    path = path && t;
  }
  for (const z3::expr& g : guards_) path = path && g;
  return path;
}

SVal Evaluator::result() {
  pc_ = m_.ctx().bool_val(true);
  for (const z3::expr& g : guards_) pc_ = pc_ && g;
  return eval(rule_.result, slots_);
}

SVal Evaluator::raises() {
  guards_.push_back(!pc_);
  return SVal{};
}

z3::expr Evaluator::result_guards() {
  z3::expr all = m_.ctx().bool_val(true);
  for (const z3::expr& g : guards_) all = all && g;
  return all;
}

z3::expr Evaluator::truth(const SVal& v) {
  switch (v.k) {
    case SVal::K::Bool:
      return *v.e;
    case SVal::K::Int:
      return *v.e != 0;
    case SVal::K::None:
      return m_.ctx().bool_val(false);
    default:
      throw Unsupported("the truth of a value that is not a number");
  }
}

z3::expr Evaluator::integer(const SVal& v) {
  if (v.k == SVal::K::Int) return *v.e;
  if (v.k == SVal::K::Bool) return z3::ite(*v.e, m_.ctx().int_val(1), m_.ctx().int_val(0));
  if (v.k == SVal::K::None) {  // none where a number is needed raises (an Invalid's arg)
    raises();
    return m_.ctx().int_val(0);
  }
  throw Unsupported("an integer operand that is not a number");
}

// A number as a node of `like`'s dtype (as the IR's operators make constants of numbers).
SNode* Evaluator::operand(const SVal& v, SNode* like) {
  if (v.k == SVal::K::Node) return v.u;
  return m_.constant_of(like->dtype, integer(v));
}

namespace {
SNode* negated(Model& m, SNode* x) {  // UOp's unary minus: logical not of a bool, else x * -1
  if (x->dtype.is_bool()) return m.build(Op::CmpNe, {x, m.constant(x->dtype, m.ctx().int_val(1))});
  return m.build(Op::Mul, {x, m.constant_of(x->dtype, m.ctx().int_val(-1))});
}
// the `none` of a value built from these operands: none when any of them is
std::optional<z3::expr> none_of(std::initializer_list<const SVal*> vs) {
  std::optional<z3::expr> n;
  for (const SVal* v : vs)
    if (v->none) n = n ? (*n || *v->none) : *v->none;
  return n;
}
SVal with_none(SVal v, std::optional<z3::expr> none) {
  v.none = std::move(none);
  return v;
}
}  // namespace

SVal Evaluator::equal(const SVal& a, const SVal& b) {
  z3::context& c = m_.ctx();
  using K = SVal::K;
  if (a.k == K::None || b.k == K::None) {
    const SVal& o = a.k == K::None ? b : a;
    if (o.k == K::None) return sbool(c.bool_val(true));
    return sbool(o.none ? *o.none : c.bool_val(false));
  }
  if ((a.k == K::Int || a.k == K::Bool) && (b.k == K::Int || b.k == K::Bool)) {
    if (a.k == K::Bool && b.k == K::Bool) return sbool(*a.e == *b.e);
    return sbool(integer(a) == integer(b));
  }
  if (a.k != b.k) return sbool(c.bool_val(false));
  switch (a.k) {
    case K::Op: {
      // a leaf's op is any op; an expanded leaf's any but WHERE and CONST
      const SVal& known = a.s.empty() ? a : b;
      const SVal& leaf = a.s.empty() ? b : a;
      if (leaf.s == "?other" && known.s.empty() && (known.op == Op::Where || known.op == Op::Const))
        return sbool(c.bool_val(false));
      if (leaf.u && known.s.empty() && known.op == Op::Const) {
        m_.const_facts(leaf.u);
        return sbool(*leaf.u->is_const);
      }
      if (!leaf.s.empty()) return sbool(m_.fresh_bool("op_eq"));
      return sbool(c.bool_val(a.op == b.op));
    }
    case K::DType:
      return sbool(c.bool_val(a.dt == b.dt));
    case K::Str:
      return sbool(c.bool_val(a.s == b.s));
    case K::Tuple: {
      if (a.items.size() != b.items.size()) return sbool(c.bool_val(false));
      z3::expr all = c.bool_val(true);
      for (size_t i = 0; i < a.items.size(); ++i) all = all && truth(equal(a.items[i], b.items[i]));
      return sbool(all);
    }
    case K::Node: {
      if (a.none || b.none) {  // none equals none only
        const z3::expr an = a.none ? *a.none : c.bool_val(false);
        const z3::expr bn = b.none ? *b.none : c.bool_val(false);
        SVal x = a, y = b;
        x.none.reset();
        y.none.reset();
        return sbool((an && bn) || (!an && !bn && truth(equal(x, y))));
      }
      // hash-consing: nodes are the same exactly when op, dtype, arg and sources are
      SNode *x = a.u, *y = b.u;
      if (x == y) return sbool(c.bool_val(true));
      if (x->dtype != y->dtype) return sbool(c.bool_val(false));
      if (!x->leaf && !y->leaf && !x->ite && !y->ite) {
        if (x->op != y->op || x->src.size() != y->src.size()) return sbool(c.bool_val(false));
        if (x->op == Op::Const) {
          if (x->invalid || y->invalid) return sbool(c.bool_val(x->invalid && y->invalid));
          return sbool(x->arg == y->arg);
        }
        z3::expr all = c.bool_val(true);
        for (size_t i = 0; i < x->src.size(); ++i)
          all = all && truth(equal(snode(x->src[i]), snode(y->src[i])));
        return sbool(all);
      }
      // a leaf may be any node: unknown, but equal nodes have equal values
      const z3::expr same = m_.fresh_bool("same");
      return sbool(same && x->val == y->val && x->def == y->def);
    }
    default:
      return sbool(c.bool_val(false));
  }
}

SVal Evaluator::binary(const RExpr& e, BinOp op, const SVal& a, const SVal& b) {
  using K = SVal::K;
  if (op == BinOp::Eq) return equal(a, b);
  if (op == BinOp::Ne) return sbool(!truth(equal(a, b)));
  if (op == BinOp::In || op == BinOp::NotIn) {
    if (b.k != K::Tuple) throw Unsupported("'in' of a value that is not a tuple");
    z3::expr any = m_.ctx().bool_val(false);
    for (const SVal& item : b.items) any = any || truth(equal(a, item));
    return sbool(op == BinOp::In ? any : !any);
  }
  if (a.k == K::Node || b.k == K::Node) {
    SNode* like = a.k == K::Node ? a.u : b.u;
    SNode* x = operand(a, like);
    SNode* y = operand(b, like);
    const auto none = none_of({&a, &b});
    auto out = [&](SNode* n) { return with_none(snode(n), none); };
    switch (op) {  // comparisons as dsl/value.cpp's uop_binary builds them
      case BinOp::Lt:
        return out(m_.build(Op::CmpLt, {x, y}));
      case BinOp::Gt:
        return out(m_.build(Op::CmpLt, {y, x}));
      case BinOp::Le:
        return out(negated(m_, m_.build(Op::CmpLt, {y, x})));
      case BinOp::Ge:
        return out(negated(m_, m_.build(Op::CmpLt, {x, y})));
      case BinOp::Sub:  // a + b*-1, as UOp's operator-
        return out(m_.build(Op::Add, {x, negated(m_, y)}));
      default:
        break;
    }
    // the ALU op the operator builds between UOps, the same table the interpreter uses
    if (const std::optional<Op> alu = uop_binop(op)) return out(m_.build(*alu, {x, y}));
    throw Unsupported(fmt::format("'{}' of UOps", binop_text(op)));
  }
  if (a.k == K::Bool && b.k == K::Bool &&
      (op == BinOp::And || op == BinOp::Or || op == BinOp::Xor)) {
    if (op == BinOp::And) return sbool(*a.e && *b.e);
    if (op == BinOp::Or) return sbool(*a.e || *b.e);
    return sbool(*a.e != *b.e);
  }
  const z3::expr x = integer(a), y = integer(b);
  const auto none = none_of({&a, &b});
  switch (op) {
    case BinOp::Add:
      return with_none(sint(m_.sat_add(x, y)), none);
    case BinOp::Sub:
      return with_none(sint(m_.sat_add(x, m_.saturate(-m_.saturate(y)))), none);
    case BinOp::Mul:
      return with_none(sint(m_.sat_mul(x, y)), none);
    case BinOp::FloorDiv:
    case BinOp::Mod:
      // a zero divisor raises: the rule stops there, it does not rewrite
      guards_.push_back(z3::implies(pc_, y != 0));
      return with_none(sint(op == BinOp::FloorDiv ? m_.floor_div(x, y) : m_.floor_mod(x, y)), none);
    case BinOp::Lt:
      return sbool(x < y);
    case BinOp::Le:
      return sbool(x <= y);
    case BinOp::Gt:
      return sbool(x > y);
    case BinOp::Ge:
      return sbool(x >= y);
    default:
      throw Unsupported(fmt::format("'{}' of integers", binop_text(op)));
  }
}

SVal Evaluator::member(const RExpr& e, const SVal& recv) {
  z3::context& c = m_.ctx();
  const std::string& name = e.name;
  if (recv.k == SVal::K::DType) {
    // the model tries bool, int8, uint8, int32, int64, uint64 and index: a rule that reads a
    // dtype's size or range could differ at int16, uint16 or uint32
    static const std::set<std::string> kinds{"is_int",   "is_bool",     "is_float",
                                             "is_index", "is_unsigned", "count"};
    if (!kinds.count(name))
      throw Unsupported(fmt::format("dtype.{} (the model tries 7 dtypes, not every one)", name));
    const Value v = tinyrw::rw::member(Value::dtype(recv.dt), name);
    if (v.kind() == Value::Kind::Bool) return sbool(c.bool_val(v.as_bool()));
    if (v.kind() == Value::Kind::Int) return sint(m_.int_val(v.as_int()));
    if (v.kind() == Value::Kind::DType) {
      SVal d;
      d.k = SVal::K::DType;
      d.dt = v.as_dtype();
      return d;
    }
    throw Unsupported(fmt::format("dtype.{}", name));
  }
  if (recv.k != SVal::K::Node)
    throw Unsupported(fmt::format(".{} of a value that is not a UOp", name));
  SNode* n = recv.u;
  auto with = [&](SVal v) { return with_none(std::move(v), recv.none); };
  if (name == "op") {
    if ((n->leaf && n->op == Op::Noop) || n->ite) {
      SVal v = unknown_op();
      if (n->other) v.s = "?other";
      if (n->leaf) v.u = n;  // its is_const fact answers `x.op == Const`
      return v;
    }
    SVal v;
    v.k = SVal::K::Op;
    v.op = n->op;
    return v;
  }
  if (name == "dtype") {
    SVal v;
    v.k = SVal::K::DType;
    v.dt = n->dtype;
    return v;
  }
  if (name == "vmin") return with(sint(n->vmin));
  if (name == "vmax") return with(sint(n->vmax));
  if (name == "finite") return with(sbool(n->finite));
  if (name == "may_wrap") return with(sbool(n->may_wrap));
  if (name == "may_raise") return with(sbool(n->may_raise));
  if (name == "arg") {
    if (n->op == Op::Const && !n->leaf && !n->ite) {
      if (n->invalid) return SVal{};
      return with(n->dtype.is_bool() ? sbool(n->val != 0) : sint(n->val));
    }
    if (!n->leaf && !n->ite && op_info(n->op).is_alu()) return SVal{};  // an ALU node's arg
    if (n->leaf && n->op == Op::Noop) {
      // any node's arg: as a constant's, its value or none (another op's arg: the rule errs
      // reading it as a number, so a model that reads more behaviours stays sound)
      m_.const_facts(n);
      const z3::expr none = recv.none ? (*recv.none || *n->arg_none) : *n->arg_none;
      return with_none(n->dtype.is_bool() ? sbool(n->val != 0) : sint(n->val), none);
    }
    throw Unsupported(fmt::format("the arg of a node the pattern does not fix ({})", n->name));
  }
  if (name == "src" || name == "nsrc") {
    if (n->leaf || n->ite)
      throw Unsupported(
          fmt::format("the sources of a node the pattern does not fix ({})", n->name));
    if (name == "nsrc") return sint(c.int_val(static_cast<int>(n->src.size())));
    SVal t;
    t.k = SVal::K::Tuple;
    for (SNode* s : n->src) t.items.push_back(snode(s));
    return t;
  }
  if (name == "is_const") {
    if (n->leaf && n->op == Op::Noop) {
      m_.const_facts(n);
      return sbool(*n->is_const);
    }
    return sbool(c.bool_val(n->op == Op::Const && !n->ite));
  }
  throw Unsupported(fmt::format("the UOp property .{}", name));
}

SVal Evaluator::method(const RExpr& e, const SVal& recv, std::vector<SVal> args) {
  const std::string& name = e.name;
  if (recv.k != SVal::K::Node)
    throw Unsupported(fmt::format(".{}() of a value that is not a UOp", name));
  SNode* x = recv.u;
  std::optional<z3::expr> none = recv.none;
  for (const SVal& a : args)
    if (a.none) none = none ? (*none || *a.none) : *a.none;
  auto out = [&](SNode* n) { return with_none(snode(n), none); };
  auto arg = [&](size_t i) {
    if (i >= args.size()) throw Unsupported(fmt::format(".{}() without its argument", name));
    return operand(args[i], x);
  };
  if (name == "lt") return out(m_.build(Op::CmpLt, {x, arg(0)}));
  if (name == "gt") return out(m_.build(Op::CmpLt, {arg(0), x}));
  if (name == "le") return out(negated(m_, m_.build(Op::CmpLt, {arg(0), x})));
  if (name == "ge") return out(negated(m_, m_.build(Op::CmpLt, {x, arg(0)})));
  if (name == "ne") return out(m_.build(Op::CmpNe, {x, arg(0)}));
  if (name == "eq") return out(negated(m_, m_.build(Op::CmpNe, {x, arg(0)})));
  if (name == "maximum") return out(m_.build(Op::Max, {x, arg(0)}));
  if (name == "minimum")
    return out(negated(m_, m_.build(Op::Max, {negated(m_, x), negated(m_, arg(0))})));
  if (name == "floordiv") return out(m_.build(Op::FloorDiv, {x, arg(0)}));
  if (name == "floormod") return out(m_.build(Op::FloorMod, {x, arg(0)}));
  if (name == "cdiv") return out(m_.build(Op::CDiv, {x, arg(0)}));
  if (name == "cmod") return out(m_.build(Op::CMod, {x, arg(0)}));
  if (name == "logical_not") {
    if (!x->dtype.is_bool()) throw Unsupported("logical_not of a number");
    return out(negated(m_, x));
  }
  if (name == "where") {  // numbers take the dtype of the other branch
    if (args.size() != 2) throw Unsupported("where() of other than two branches");
    SNode* like = args[0].k == SVal::K::Node   ? args[0].u
                  : args[1].k == SVal::K::Node ? args[1].u
                                               : nullptr;
    if (!like) throw Unsupported("where() of two numbers");
    return out(m_.build(Op::Where, {x, operand(args[0], like), operand(args[1], like)}));
  }
  if (name == "const_like") {
    if (args.empty()) throw Unsupported("const_like() without a value");
    return out(m_.constant_of(x->dtype, integer(args[0])));
  }
  if (name == "cast") {
    if (args.empty() || args[0].k != SVal::K::DType)
      throw Unsupported("cast() to an unknown dtype");
    if (args[0].dt == x->dtype) return out(x);
    return out(m_.alu(Op::Cast, args[0].dt, {x}));
  }
  if (name == "precedes") return sbool(m_.fresh_bool("precedes"));  // an order: any answer
  if (name == "replace") {
    if (x->leaf || x->ite) throw Unsupported("replace() of a node the pattern does not fix");
    std::vector<SNode*> src = x->src;
    Op op = x->op;
    DType d = x->dtype;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& key = i + 1 < e.arg_names.size() ? e.arg_names[i + 1] : "";
      if (key == "src") {
        if (args[i].k != SVal::K::Tuple) throw Unsupported("replace(src:) of a non-tuple");
        src.clear();
        for (const SVal& s : args[i].items) src.push_back(operand(s, x));
      } else if (key == "op" && args[i].k == SVal::K::Op && args[i].s.empty()) {
        op = args[i].op;
      } else if (key == "dtype" && args[i].k == SVal::K::DType) {
        d = args[i].dt;
      } else {
        throw Unsupported(fmt::format("replace({}:)", key));
      }
    }
    if (op == Op::Const) throw Unsupported("replace() of a constant");
    return out(m_.alu(op, d, std::move(src)));
  }
  throw Unsupported(fmt::format("the UOp method .{}()", name));
}

SVal Evaluator::builtin(const RExpr& e, std::vector<SVal> args) {
  z3::context& c = m_.ctx();
  const std::string& name = e.name;
  auto need = [&](size_t n) {
    if (args.size() != n) throw Unsupported(fmt::format("{}() of {} arguments", name, args.size()));
  };
  if (name == "const_like") {
    need(2);
    if (args[0].k != SVal::K::Node) throw Unsupported("const_like() of a value that is not a UOp");
    // a none arg makes the constant Invalid (Value's to_arg), undefined in any dtype
    if (args[1].k == SVal::K::None)
      return with_none(snode(m_.invalid(args[0].u->dtype)), args[0].none);
    return with_none(snode(m_.constant_of(args[0].u->dtype, integer(args[1]))),
                     none_of({&args[0], &args[1]}));
  }
  if (name == "select") {
    need(3);
    if (args[0].k == SVal::K::Node) {  // a UOp condition: the IR builds a WHERE
      SNode* like = args[1].k == SVal::K::Node   ? args[1].u
                    : args[2].k == SVal::K::Node ? args[2].u
                                                 : nullptr;
      if (!like) throw Unsupported("select() of a UOp condition and two numbers");
      return with_none(
          snode(m_.build(Op::Where, {args[0].u, operand(args[1], like), operand(args[2], like)})),
          none_of({&args[0], &args[1], &args[2]}));
    }
    const z3::expr cond = truth(args[0]);
    if (is_true(cond)) return args[1];
    if (is_false(cond)) return args[2];
    SVal& a = args[1];
    SVal& b = args[2];
    using K = SVal::K;
    if (a.k == K::None && b.k == K::None) return SVal{};
    if (a.k == K::None || b.k == K::None) {  // a node (or int) that is none on one side
      SVal v = a.k == K::None ? b : a;
      const z3::expr other = v.none ? *v.none : c.bool_val(false);
      v.none = a.k == K::None ? z3::ite(cond, c.bool_val(true), other)
                              : z3::ite(cond, other, c.bool_val(true));
      return v;
    }
    auto merged_none = [&]() -> std::optional<z3::expr> {
      if (!a.none && !b.none) return std::nullopt;
      return z3::ite(cond, a.none ? *a.none : c.bool_val(false),
                     b.none ? *b.none : c.bool_val(false));
    };
    if (a.k == K::Node && b.k == K::Node)
      return with_none(snode(m_.select(cond, a.u, b.u)), merged_none());
    if (a.k == K::Bool && b.k == K::Bool) return sbool(z3::ite(cond, *a.e, *b.e));
    if ((a.k == K::Int || a.k == K::Bool) && (b.k == K::Int || b.k == K::Bool))
      return with_none(sint(z3::ite(cond, integer(a), integer(b))), merged_none());
    if (a.k == K::Node || b.k == K::Node) {
      SNode* like = a.k == K::Node ? a.u : b.u;
      return with_none(snode(m_.select(cond, operand(a, like), operand(b, like))), merged_none());
    }
    throw Unsupported("select() of values of different kinds");
  }
  if (name == "max" || name == "min") {
    need(2);
    if (args[0].k == SVal::K::Node || args[1].k == SVal::K::Node) {
      SNode* like = args[0].k == SVal::K::Node ? args[0].u : args[1].u;
      SNode* x = operand(args[0], like);
      SNode* y = operand(args[1], like);
      if (name == "max") return snode(m_.build(Op::Max, {x, y}));
      return snode(negated(m_, m_.build(Op::Max, {negated(m_, x), negated(m_, y)})));
    }
    const z3::expr x = integer(args[0]), y = integer(args[1]);
    return sint(name == "max" ? z3::ite(x < y, y, x) : z3::ite(x < y, x, y));
  }
  if (name == "abs") {
    need(1);
    const z3::expr x = integer(args[0]);
    return sint(m_.saturate(z3::ite(x < 0, -x, x)));
  }
  if (name == "len") {
    need(1);
    if (args[0].k != SVal::K::Tuple) throw Unsupported("len() of a value that is not a tuple");
    return sint(c.int_val(static_cast<int>(args[0].items.size())));
  }
  if (name == "sum") {
    if (args.size() != 1 || args[0].k != SVal::K::Tuple) throw Unsupported("sum() of this");
    const auto& items = args[0].items;
    if (items.empty()) return sint(c.int_val(0));
    SVal acc = items[0];
    for (size_t i = 1; i < items.size(); ++i) acc = binary(e, BinOp::Add, acc, items[i]);
    return acc;
  }
  if (name == "uop") {
    if (args.size() < 2 || args[0].k != SVal::K::Op || !args[0].s.empty() ||
        args[1].k != SVal::K::DType)
      throw Unsupported("uop() of an op or dtype the rule does not fix");
    std::vector<SNode*> src;
    for (size_t i = 2; i < args.size(); ++i) {
      const std::string& key = i < e.arg_names.size() ? e.arg_names[i] : "";
      if (key != "src" || args[i].k != SVal::K::Tuple)
        throw Unsupported(fmt::format("uop({}:)", key));
      for (const SVal& s : args[i].items) {
        if (s.k != SVal::K::Node) throw Unsupported("uop() of a source that is not a UOp");
        src.push_back(s.u);
      }
    }
    return snode(m_.alu(args[0].op, args[1].dt, std::move(src)));
  }
  throw Unsupported(fmt::format("the builtin {}()", name));
}

SVal Evaluator::helper(const RExpr& e, std::vector<SVal> args) {
  z3::context& c = m_.ctx();
  const std::string& name = e.name;
  if (name == "exact") {  // not saturated at the 128-bit limits
    if (args.size() != 1) throw Unsupported("exact() of several values");
    return sbool(!m_.is_infinite(integer(args[0])));
  }
  if (name == "fits") {  // v is a constant of x's dtype as it is
    if (args.size() != 2 || args[0].k != SVal::K::Node) throw Unsupported("fits() of this");
    const DType d = args[0].u->dtype;
    const z3::expr v = integer(args[1]);
    z3::expr ok = !m_.is_infinite(v);
    if (d.is_int() && !d.is_index()) ok = ok && m_.in_dtype(d, v);
    return sbool(ok);
  }
  if (name == "fold_const") {  // the constant the ALU node of constants is, none where undefined
    if (args.size() != 1 || args[0].k != SVal::K::Node) throw Unsupported("fold_const() of this");
    SNode* a = args[0].u;
    if (a->leaf || a->ite) throw Unsupported("fold_const() of a node the pattern does not fix");
    z3::expr infinite = c.bool_val(false);  // exec_alu folds no saturated constant
    for (SNode* s : a->src) {
      if (s->op != Op::Const || s->leaf) throw Unsupported("fold_const() of a non-constant");
      if (s->invalid) return SVal{};
      if (!s->dtype.is_bool()) infinite = infinite || m_.is_infinite(s->val);
    }
    SVal v = snode(m_.constant(a->dtype, a->val));
    v.none = !a->def || infinite;
    return v;
  }
  // a helper of concrete arguments runs as it is (it is linked into rwc): gcd(4, 6)
  std::vector<Value> concrete;
  for (const SVal& a : args) {
    if ((a.k == SVal::K::Int || a.k == SVal::K::Bool) && a.e->simplify().is_numeral()) {
      const std::string s = a.e->simplify().get_decimal_string(0);
      concrete.push_back(Value::integer(parse_i128(s)));
    } else if (a.k == SVal::K::DType) {
      concrete.push_back(Value::dtype(a.dt));
    } else if (a.k == SVal::K::Op && a.s.empty()) {
      concrete.push_back(Value::op(a.op));
    } else {
      throw Unsupported(fmt::format("the helper {}() has no SMT model", name));
    }
  }
  const Helper* h = find_helper(name);
  // (only a helper of numbers runs: one giving a UOp would build it on a proof's thread, and the
  // UOp table is not shared between threads)
  if (!h || (h->result != Type::Int && h->result != Type::Bool))
    throw Unsupported(fmt::format("the helper {}() has no SMT model", name));
  RewriteContext ctx;
  const Value r = h->fn(ctx, concrete);
  if (r.kind() == Value::Kind::Bool) return sbool(c.bool_val(r.as_bool()));
  if (r.kind() == Value::Kind::Int) return sint(m_.int_val(r.as_int()));
  throw Unsupported(fmt::format("the helper {}() gives a value the model does not hold", name));
}

SVal Evaluator::eval(const RExpr& e, std::vector<SVal>& frame) {
  z3::context& c = m_.ctx();
  using K = RExpr::K;
  switch (e.k) {
    case K::Const: {
      const Value& v = e.value;
      switch (v.kind()) {
        case Value::Kind::None:
          return SVal{};
        case Value::Kind::Bool:
          return sbool(c.bool_val(v.as_bool()));
        case Value::Kind::Int:
          return sint(m_.int_val(v.as_int()));
        case Value::Kind::Op: {
          SVal o;
          o.k = SVal::K::Op;
          o.op = v.as_op();
          return o;
        }
        case Value::Kind::DType: {
          SVal d;
          d.k = SVal::K::DType;
          d.dt = v.as_dtype();
          return d;
        }
        case Value::Kind::String: {
          SVal s;
          s.k = SVal::K::Str;
          s.s = v.as_string();
          return s;
        }
        case Value::Kind::Tuple: {
          SVal t;
          t.k = SVal::K::Tuple;
          for (const Value& item : v.items()) {
            RExpr k;
            k.k = K::Const;
            k.value = item;
            t.items.push_back(eval(k, frame));
          }
          return t;
        }
        default:
          throw Unsupported(fmt::format("the constant {}", v.repr()));
      }
    }
    case K::Slot:
      return frame.at(static_cast<size_t>(e.slot));
    case K::Binary:
      return binary(e, e.bop, eval(e.kids[0], frame), eval(e.kids[1], frame));
    case K::And:  // && and || evaluate their right side only where the left does not decide
    case K::Or: {
      const bool is_and = e.k == K::And;
      const z3::expr l = truth(eval(e.kids[0], frame));
      if (is_and ? is_false(l) : is_true(l)) return sbool(l);
      const z3::expr saved = pc_;
      pc_ = pc_ && (is_and ? l : !l);
      const z3::expr r = truth(eval(e.kids[1], frame));
      pc_ = saved;
      return sbool(is_and ? (l && r) : (l || r));
    }
    case K::Not:
      return sbool(!truth(eval(e.kids[0], frame)));
    case K::Neg: {
      const SVal v = eval(e.kids[0], frame);
      if (v.k == SVal::K::Node) return with_none(snode(negated(m_, v.u)), v.none);
      return sint(m_.saturate(-integer(v)));
    }
    case K::Member:
      if (!e.kids[0].record.empty()) throw Unsupported("record fields");
      return member(e, eval(e.kids[0], frame));
    case K::Method: {
      const SVal recv = eval(e.kids[0], frame);
      std::vector<SVal> args;
      for (size_t i = 1; i < e.kids.size(); ++i) args.push_back(eval(e.kids[i], frame));
      return method(e, recv, std::move(args));
    }
    case K::Index: {
      const SVal seq = eval(e.kids[0], frame);
      const SVal idx = eval(e.kids[1], frame);
      if (seq.k != SVal::K::Tuple) throw Unsupported("indexing a value that is not a tuple");
      const z3::expr i = integer(idx).simplify();
      if (!i.is_numeral()) throw Unsupported("a tuple index that is not a constant");
      int64_t k = i.get_numeral_int64();
      const auto n = static_cast<int64_t>(seq.items.size());
      if (k < 0) k += n;
      if (k < 0 || k >= n) return raises();
      return seq.items[static_cast<size_t>(k)];
    }
    case K::Builtin: {
      std::vector<SVal> args;
      for (const RExpr& k : e.kids) args.push_back(eval(k, frame));
      return builtin(e, std::move(args));
    }
    case K::Construct: {
      std::vector<SNode*> src;
      SNode* like = nullptr;
      std::vector<SVal> args;
      for (const RExpr& k : e.kids) {
        args.push_back(eval(k, frame));
        if (!like && args.back().k == SVal::K::Node) like = args.back().u;
      }
      if (!like) throw Unsupported(fmt::format("{}() of no UOp", op_name(e.op)));
      std::optional<z3::expr> none;
      for (const SVal& a : args) {
        src.push_back(operand(a, like));
        if (a.none) none = none ? (*none || *a.none) : *a.none;
      }
      return with_none(snode(m_.build(e.op, std::move(src))), none);
    }
    case K::Helper: {
      std::vector<SVal> args;
      for (const RExpr& k : e.kids) args.push_back(eval(k, frame));
      return helper(e, std::move(args));
    }
    case K::Tuple: {
      SVal t;
      t.k = SVal::K::Tuple;
      for (const RExpr& k : e.kids) t.items.push_back(eval(k, frame));
      return t;
    }
    case K::DefCall: {
      const ResolvedDef& d = *e.def;
      std::vector<SVal> callee(d.slot_names.size());
      for (size_t i = 0; i < e.kids.size(); ++i) callee[i] = eval(e.kids[i], frame);
      return eval(d.body, callee);
    }
    case K::Cond: {
      const z3::expr cond = truth(eval(e.kids[1], frame));
      if (is_true(cond)) return eval(e.kids[0], frame);
      if (is_false(cond)) return eval(e.kids[2], frame);
      const z3::expr saved = pc_;  // each branch evaluated where it is taken
      pc_ = saved && cond;
      SVal a = eval(e.kids[0], frame);
      pc_ = saved && !cond;
      SVal b = eval(e.kids[2], frame);
      pc_ = saved;
      RExpr sel;
      sel.k = K::Builtin;
      sel.name = "select";
      return builtin(sel, {sbool(cond), std::move(a), std::move(b)});
    }
    case K::Slice:
      throw Unsupported("tuple slices");
    case K::Comp:
      throw Unsupported("comprehensions");
    case K::Invert:
      throw Unsupported("~");
  }
  throw Unsupported("an expression");
}

}  // namespace tinyrw::rw::prove

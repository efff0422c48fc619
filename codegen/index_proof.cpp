#include "codegen/index_proof.h"

#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "ir/graph.h"
#include "ir/render.h"

#ifdef TINYRW_HAVE_Z3
#include <z3++.h>
#endif

namespace tinyrw {

#ifdef TINYRW_HAVE_Z3
namespace {

struct Unsupported {
  std::string why;
};

class Translator {
 public:
  explicit Translator(z3::context& z) : z_(z), facts_(z.bool_val(true)) {}

  z3::expr facts() const { return facts_; }
  // the RANGEs, variables and thread ids, by name: a counterexample's coordinates
  const std::vector<std::pair<std::string, z3::expr>>& loops() const { return loops_; }

  z3::expr of(const UOp& root) {
    for (const UOp& u : toposort(root)) {
      if (memo_.count(u)) continue;
      memo_.emplace(u, translate(u));
    }
    return memo_.at(root);
  }

 private:
  z3::expr src(const UOp& u, size_t k) { return memo_.at(u.src(k)); }

  // A value the kernel computes but the proof does not model: an integer within its bounds, or
  // any boolean.
  z3::expr leaf(const UOp& u, const std::string& name) {
    if (u.dtype().is_bool()) {
      return z_.bool_const(name.c_str());
    }
    if (!u.dtype().is_int()) throw Unsupported{fmt::format("a {} value", u.dtype().name())};
    z3::expr v = z_.int_const(name.c_str());
    if (u.op() == Op::Range || u.op() == Op::DefineVar || u.op() == Op::Special)
      loops_.emplace_back(name, v);
    if (!u.vmin().is_infinite()) facts_ = facts_ && v >= z_.int_val(i128_text(u.vmin().i).c_str());
    if (!u.vmax().is_infinite()) facts_ = facts_ && v <= z_.int_val(i128_text(u.vmax().i).c_str());
    return v;
  }
  static std::string i128_text(i128 v) { return to_string(v); }

  z3::expr floor_div(const z3::expr& a, const z3::expr& b) {
    // Z3's div is Euclidean: the floor for a positive divisor; a negative one flips both signs.
    // A zero divisor divides by 1, as the CPU renderer does (it records the error and runs on).
    const z3::expr d = z3::ite(b == 0, z_.int_val(1), b);
    return z3::ite(d > 0, a / d, (-a) / (-d));
  }

  // Z3's integers do not wrap; the kernel's do. Arithmetic is modelled only where its interval
  // bounds show it cannot: finite, and inside its dtype without filling it (a bound analysis
  // that sees a wrap widens to the whole dtype).
  void check_no_wrap(const UOp& u) {
    if (!u.dtype().is_int()) return;
    if (u.vmin().is_infinite() || u.vmax().is_infinite())
      throw Unsupported{fmt::format("{} of unbounded value", op_name(u.op()))};
    const i128 lo = u.vmin().i, hi = u.vmax().i;
    constexpr i128 kIndexLimit = i128{1} << 62;  // index math is rendered in 64 bits
    const bool wraps = u.dtype().is_index()
                           ? lo <= -kIndexLimit || hi >= kIndexLimit
                           : lo <= u.dtype().int_min() && hi >= u.dtype().int_max();
    if (wraps) throw Unsupported{fmt::format("{} that may wrap around", op_name(u.op()))};
  }

  // A leaf's name in counterexamples: its rendering (r0 for a RANGE), made unique.
  std::string leaf_name(const UOp& u) {
    std::string name = u.op() == Op::Range || u.op() == Op::DefineVar || u.op() == Op::Special
                           ? render(u)
                           : fmt::format("{}{}", op_name(u.op()), memo_.size());
    if (!used_.insert(name).second) name += fmt::format("#{}", memo_.size());
    used_.insert(name);
    return name;
  }

  z3::expr translate(const UOp& u) {
    const std::string name = leaf_name(u);
    if (u.op() == Op::Add || u.op() == Op::Mul || u.op() == Op::Neg || u.op() == Op::FloorDiv ||
        u.op() == Op::FloorMod || u.op() == Op::CDiv || u.op() == Op::CMod)
      check_no_wrap(u);
    switch (u.op()) {
      case Op::Const:
        if (u.arg().is_bool()) return z_.bool_val(u.arg().as_bool());
        if (u.arg().is_int()) return z_.int_val(i128_text(u.arg().as_int()).c_str());
        throw Unsupported{"a constant " + u.arg().repr()};
      case Op::Add:
        return src(u, 0) + src(u, 1);
      case Op::Mul:
        return src(u, 0) * src(u, 1);
      case Op::Neg:
        return -src(u, 0);
      case Op::FloorDiv:
        return floor_div(src(u, 0), src(u, 1));
      case Op::FloorMod:
        return src(u, 0) - src(u, 1) * floor_div(src(u, 0), src(u, 1));
      case Op::CDiv:
      case Op::CMod: {  // truncation toward zero
        const z3::expr a = src(u, 0), b = src(u, 1), q = floor_div(a, b), r = a - b * q;
        const z3::expr t = z3::ite(r != 0 && ((a < 0) != (b < 0)), q + 1, q);
        return u.op() == Op::CDiv ? t : a - b * t;
      }
      case Op::Max:
        return z3::ite(src(u, 0) >= src(u, 1), src(u, 0), src(u, 1));
      case Op::CmpLt:
        return src(u, 0) < src(u, 1);
      case Op::CmpNe:
        return src(u, 0) != src(u, 1);
      case Op::CmpEq:
        return src(u, 0) == src(u, 1);
      case Op::And:
        return u.dtype().is_bool() ? src(u, 0) && src(u, 1) : leaf(u, name);
      case Op::Or:
        return u.dtype().is_bool() ? src(u, 0) || src(u, 1) : leaf(u, name);
      case Op::Where: {
        if (u.src(2).op() == Op::Const && u.src(2).arg().is_invalid())
          throw Unsupported{"a gated index inside index math"};
        return z3::ite(src(u, 0), src(u, 1), src(u, 2));
      }
      case Op::Cast:
        if (u.dtype().is_int() && u.src(0).dtype().is_int()) {
          // a cast that keeps every value is the identity; others are modelled as unknowns
          const UOp& s = u.src(0);
          if (!s.vmin().is_infinite() && !s.vmax().is_infinite() &&
              Num::of(s.vmin().i) >= u.vmin() && Num::of(s.vmax().i) <= u.vmax())
            return src(u, 0);
        }
        return leaf(u, name);
      default:
        return leaf(u, name);  // RANGE, DEFINE_VAR, SPECIAL, loads: within their bounds
    }
  }

  z3::context& z_;
  z3::expr facts_;
  std::unordered_map<UOp, z3::expr> memo_;
  std::vector<std::pair<std::string, z3::expr>> loops_;
  std::unordered_set<std::string> used_;
};

// An integer a model gives, as text (Z3 writes -1 as "(- 1)").
std::string value_text(const z3::expr& v) {
  int64_t i = 0;
  if (v.is_numeral_i64(i)) return std::to_string(i);
  return v.to_string();
}

}  // namespace

// Z3's resource units for one proof (deterministic; about a second of solving here).
constexpr unsigned kResourceLimit = 5'000'000;

IndexProofResult prove_index_in_bounds(const UOp& index, const UOp& gate, int64_t size) {
  try {
    z3::context z;
    Translator t(z);
    const z3::expr i = t.of(index);
    const z3::expr g = gate ? t.of(gate) : z.bool_val(true);
    z3::solver s(z);
    z3::params p(z);
    // a resource budget, not a clock, so that a verdict does not depend on the machine's load;
    // the timeout only guards against a budget that takes far longer than it should
    p.set("rlimit", kResourceLimit);
    p.set("timeout", 10000u);
    s.set(p);
    s.add(t.facts());
    s.add(g);
    s.add(i < 0 || i >= z.int_val(static_cast<int64_t>(size)));
    switch (s.check()) {
      case z3::unsat:
        return {IndexProof::InBounds, ""};
      case z3::sat: {
        const z3::model m = s.get_model();
        std::string cex = fmt::format("index {}", value_text(m.eval(i, true)));
        for (const auto& [u, v] : t.loops())
          cex += fmt::format(", {}={}", u, value_text(m.eval(v, true)));
        return {IndexProof::OutOfBounds, cex};
      }
      default:
        return {IndexProof::Unknown, "Z3 gave up: " + s.reason_unknown()};
    }
  } catch (const Unsupported& u) {
    return {IndexProof::Unknown, "not modelled: " + u.why};
  } catch (const z3::exception& e) {
    return {IndexProof::Unknown, std::string("Z3: ") + e.msg()};
  }
}

#else

IndexProofResult prove_index_in_bounds(const UOp&, const UOp&, int64_t) {
  return {IndexProof::Unknown, "built without Z3 (apt-get install libz3-dev)"};
}

#endif

}  // namespace tinyrw

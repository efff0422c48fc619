// Integer helpers callable from .rw rules (registered once; compiled and interpreted rules share
// them). Each is a pure function of its arguments: primitives of exact integer math.
#include "dsl/typed_helper.h"
#include "ir/uop.h"

namespace tinyrw::rw {
namespace {

i128 log2_int(i128 v) {
  if (v <= 0) throw EvalError("log2_int of a non-positive number");
  i128 r = 0;
  for (; v > 1; v >>= 1) ++r;
  return r;
}

const HelperRegistrar kGcd(typed_helper(
    "gcd", +[](i128 a, i128 b) { return gcd(a, b); }));
// C++: a primitive (a gcd over a tuple, which no builtin folds).
const HelperRegistrar kGcdOf(typed_helper(
    "gcd_of", +[](const std::vector<Value>& t) {
      i128 g = 0;
      for (const Value& v : t) g = gcd(g, v.as_int());
      return g;
    }));
const HelperRegistrar kIsPow2(typed_helper(
    "is_pow2", +[](i128 v) { return v > 0 && (v & (v - 1)) == 0; }));
const HelperRegistrar kLog2(typed_helper("log2_int", &log2_int));
const HelperRegistrar kSafeCast(typed_helper(
    "can_safe_cast", +[](DType from, DType to) { return can_safe_cast(from, to); }));

// C++: a search over shift counts (Hacker's Delight, chapter 10; tinygrad's magicgu): (m, s) with
// x // d == (x * m) >> s for every 0 <= x <= vmax, d > 0; none where the search would leave the
// exact 128-bit range (vmax or d of 2^62 or more).
const HelperRegistrar kMagicDivisor(typed_helper(
    "magic_divisor", +[](i128 vmax, i128 d) -> Value {
      constexpr i128 kLimit = static_cast<i128>(1) << 62;
      if (vmax < 0 || d <= 0 || vmax >= kLimit || d >= kLimit) return Value();
      const i128 nc = (vmax + 1) / d * d - 1;
      int nbits = 0;
      for (i128 v = vmax; v > 0; v >>= 1) ++nbits;
      for (int s = 0; s <= 2 * nbits; ++s) {
        const i128 p = static_cast<i128>(1) << s;
        if (p > nc * (d - 1 - (p - 1) % d))
          return Value::tuple({Value::integer((p + d - 1 - (p - 1) % d) / d), Value::integer(s)});
      }
      return Value();
    }));

// C++: a builder (tinygrad's polyN): the polynomial with these coefficients, highest power first,
// at x, by Horner's scheme ((c0 * x + c1) * x + c2 ...), in x's dtype.
const HelperRegistrar kPolynomial(typed_helper(
    "polynomial", +[](const UOp& x, const std::vector<Value>& coeffs) {
      if (coeffs.empty()) throw EvalError("polynomial() of no coefficients");
      UOp acc = x.const_like(coeffs[0].as_float());
      for (size_t i = 1; i < coeffs.size(); ++i)
        acc = acc.alu(Op::Mul, {x}).alu(Op::Add, {x.const_like(coeffs[i].as_float())});
      return acc;
    }));

}  // namespace
}  // namespace tinyrw::rw

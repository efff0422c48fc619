// Integer helpers callable from .rw rules (registered once; compiled and interpreted rules share
// them). Each is a pure function of its arguments: primitives of exact integer math.
#include "dsl/typed_helper.h"

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

}  // namespace
}  // namespace tinyrw::rw

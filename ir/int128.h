// 128-bit integer helpers for exact integer ranges (vmin/vmax) and constant folding.
//
// Bounds of the weak `index` dtype are effectively unbounded, so range arithmetic saturates at
// +-kInfinity: any magnitude at or beyond it means "unbounded in that direction". Every value of a
// real dtype (int64/uint64 included) lies far inside, so results for them are always exact.
// A saturated number is not a value: folds must use the exact_* operations below, which refuse
// (return false) rather than compute with one.
#pragma once

#include <cstdint>
#include <string>

namespace tinyrw {

using i128 = __int128;
using u128 = unsigned __int128;

// The largest 128-bit magnitude stands for infinity; products of two 64-bit values stay exact.
inline constexpr i128 kInfinity = static_cast<i128>(~static_cast<unsigned __int128>(0) >> 1);

inline constexpr bool is_infinite(i128 v) { return v >= kInfinity || v <= -kInfinity; }
inline constexpr i128 saturate(i128 v) {
  return v >= kInfinity ? kInfinity : v <= -kInfinity ? -kInfinity : v;
}

inline constexpr i128 sat_add(i128 a, i128 b) {
  if (is_infinite(a)) return saturate(a);
  if (is_infinite(b)) return saturate(b);
  i128 r = 0;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? kInfinity : -kInfinity;
  return saturate(r);
}
inline constexpr i128 sat_neg(i128 a) { return saturate(-saturate(a)); }
inline constexpr i128 sat_sub(i128 a, i128 b) { return sat_add(a, sat_neg(b)); }
inline constexpr i128 sat_mul(i128 a, i128 b) {
  if (a == 0 || b == 0) return 0;
  const bool neg = (a < 0) != (b < 0);
  if (is_infinite(a) || is_infinite(b)) return neg ? -kInfinity : kInfinity;
  i128 r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return neg ? -kInfinity : kInfinity;
  return saturate(r);
}

// Exact arithmetic for folds: false when an operand is infinite or the result's magnitude reaches
// kInfinity (it would saturate), so the caller leaves the expression as it is.
inline constexpr bool exact_add(i128 a, i128 b, i128& r) {
  return !is_infinite(a) && !is_infinite(b) && !__builtin_add_overflow(a, b, &r) && !is_infinite(r);
}
inline constexpr bool exact_sub(i128 a, i128 b, i128& r) {
  return !is_infinite(a) && !is_infinite(b) && !__builtin_sub_overflow(a, b, &r) && !is_infinite(r);
}
inline constexpr bool exact_mul(i128 a, i128 b, i128& r) {
  return !is_infinite(a) && !is_infinite(b) && !__builtin_mul_overflow(a, b, &r) && !is_infinite(r);
}

// Python semantics: floor division and a modulo with the divisor's sign. b must be nonzero.
inline constexpr i128 floor_div(i128 a, i128 b) {
  i128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
// (from the remainder: a - floor_div(a, b) * b would overflow where the quotient times b does)
inline constexpr i128 floor_mod(i128 a, i128 b) {
  const i128 r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
// C semantics: truncation toward zero, remainder with the dividend's sign. b must be nonzero.
inline constexpr i128 trunc_div(i128 a, i128 b) { return a / b; }
inline constexpr i128 trunc_mod(i128 a, i128 b) { return a % b; }

inline constexpr i128 gcd(i128 a, i128 b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    const i128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

std::string to_string(i128 v);

}  // namespace tinyrw

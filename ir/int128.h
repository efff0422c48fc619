// 128-bit integer helpers for exact integer ranges (vmin/vmax) and constant folding.
//
// Bounds of the weak `index` dtype are effectively unbounded, so range arithmetic saturates at
// +-kInfinity: any magnitude at or beyond it means "unbounded in that direction". Every value of a
// real dtype (int64/uint64 included) lies far inside, so results for them are always exact.
#pragma once

#include <cstdint>
#include <string>

namespace tinyrw {

using i128 = __int128;
using u128 = unsigned __int128;

// 2^120: anything this large is treated as infinite; products of two in-range int64 values fit.
inline constexpr i128 kInfinity = static_cast<i128>(1) << 120;

inline constexpr bool is_infinite(i128 v) { return v >= kInfinity || v <= -kInfinity; }
inline constexpr i128 saturate(i128 v) {
  return v >= kInfinity ? kInfinity : v <= -kInfinity ? -kInfinity : v;
}

inline constexpr i128 sat_add(i128 a, i128 b) {
  if (is_infinite(a)) return saturate(a);
  if (is_infinite(b)) return saturate(b);
  return saturate(a + b);
}
inline constexpr i128 sat_neg(i128 a) { return saturate(-a); }
inline constexpr i128 sat_sub(i128 a, i128 b) { return sat_add(a, sat_neg(b)); }
inline constexpr i128 sat_mul(i128 a, i128 b) {
  if (a == 0 || b == 0) return 0;
  const bool neg = (a < 0) != (b < 0);
  if (is_infinite(a) || is_infinite(b)) return neg ? -kInfinity : kInfinity;
  // |a|,|b| < 2^120: check the product against 2^120 without overflowing 128 bits.
  const u128 ua = a < 0 ? static_cast<u128>(-a) : static_cast<u128>(a);
  const u128 ub = b < 0 ? static_cast<u128>(-b) : static_cast<u128>(b);
  if (ua > static_cast<u128>(kInfinity) / ub) return neg ? -kInfinity : kInfinity;
  const i128 p = static_cast<i128>(ua * ub);
  return saturate(neg ? -p : p);
}

// Python semantics: floor division and a modulo with the divisor's sign. b must be nonzero.
inline constexpr i128 floor_div(i128 a, i128 b) {
  i128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline constexpr i128 floor_mod(i128 a, i128 b) { return a - floor_div(a, b) * b; }
// C semantics: truncation toward zero, remainder with the dividend's sign. b must be nonzero.
inline constexpr i128 trunc_div(i128 a, i128 b) { return a / b; }
inline constexpr i128 trunc_mod(i128 a, i128 b) { return a % b; }

std::string to_string(i128 v);

}  // namespace tinyrw

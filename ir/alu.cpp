#include "ir/alu.h"

#include <cmath>

namespace tinyrw {

namespace {

std::optional<Arg> int_alu(Op op, DType dt, std::span<const Arg> s) {
  auto v = [&](size_t i) { return s[i].as_int(); };
  // Results beyond the exact range (saturated) are not folded: the expression stays as written.
  auto wrap = [&](i128 r) -> std::optional<Arg> {
    if (is_infinite(r)) return std::nullopt;
    return Arg::integer(truncate_int(dt, r));
  };
  for (const Arg& a : s)
    if (is_infinite(a.as_int())) return std::nullopt;
  switch (op) {
    case Op::Neg:
      return wrap(sat_neg(v(0)));
    case Op::Trunc:
      return wrap(v(0));
    case Op::Add:
      return wrap(sat_add(v(0), v(1)));
    case Op::Sub:
      return wrap(sat_sub(v(0), v(1)));
    case Op::Mul:
      return wrap(sat_mul(v(0), v(1)));
    case Op::Max:
      return wrap(std::max(v(0), v(1)));
    case Op::FloorDiv:
    case Op::FloorMod:
    case Op::CDiv:
    case Op::CMod: {
      if (v(1) == 0) return std::nullopt;
      if (is_infinite(v(0)) || is_infinite(v(1))) return std::nullopt;
      const i128 r = op == Op::FloorDiv   ? floor_div(v(0), v(1))
                     : op == Op::FloorMod ? floor_mod(v(0), v(1))
                     : op == Op::CDiv     ? trunc_div(v(0), v(1))
                                          : trunc_mod(v(0), v(1));
      return wrap(r);
    }
    case Op::And:
      return wrap(v(0) & v(1));
    case Op::Or:
      return wrap(v(0) | v(1));
    case Op::Xor:
      return wrap(v(0) ^ v(1));
    case Op::Shl:
      if (v(1) < 0 || v(1) >= 127) return std::nullopt;
      return wrap(sat_mul(v(0), static_cast<i128>(1) << static_cast<int>(v(1))));
    case Op::Shr:
      if (v(1) < 0 || v(1) >= 127) return std::nullopt;
      return wrap(floor_div(v(0), static_cast<i128>(1) << static_cast<int>(v(1))));
    case Op::MulAcc:
      return wrap(sat_add(sat_mul(v(0), v(1)), v(2)));
    default:
      return std::nullopt;
  }
}

std::optional<Arg> float_alu(Op op, DType dt, std::span<const Arg> s) {
  auto v = [&](size_t i) { return s[i].as_float(); };
  auto round = [&](double r) { return Arg::real(truncate_float(dt, r)); };
  switch (op) {
    case Op::Neg:
      return round(-v(0));
    case Op::Trunc:
      return round(std::trunc(v(0)));
    case Op::Sqrt:
      return round(std::sqrt(v(0)));
    case Op::Exp2:
      return round(std::exp2(v(0)));
    case Op::Log2:
      return round(v(0) == 0 ? -INFINITY : std::log2(v(0)));
    case Op::Sin:
      return round(std::sin(v(0)));
    case Op::Reciprocal:
      return round(1.0 / v(0));
    case Op::Add:
      return round(v(0) + v(1));
    case Op::Sub:
      return round(v(0) - v(1));
    case Op::Mul:
      return round(v(0) * v(1));
    case Op::FDiv:
      return round(v(0) / v(1));
    case Op::Max:  // a if a > b else b (max(-0.0, 0.0) is 0.0, as the CPU's select gives)
      return round(std::isnan(v(0)) || std::isnan(v(1)) ? NAN : v(0) > v(1) ? v(0) : v(1));
    case Op::Pow:
      return round(std::pow(v(0), v(1)));
    case Op::MulAcc:  // one rounding in the dtype: a float32 fma rounded again from double may
                      // differ from the CPU's single-precision FMA
      if (dt == dtypes::float32)
        return round(
            std::fma(static_cast<float>(v(0)), static_cast<float>(v(1)), static_cast<float>(v(2))));
      return round(std::fma(v(0), v(1), v(2)));
    default:
      return std::nullopt;
  }
}

bool truthy(const Arg& a) { return a.is_float() ? a.as_float() != 0 : a.as_int() != 0; }

// Numeric comparison of two constants of the same dtype (ints exactly, floats as doubles).
int compare(const Arg& a, const Arg& b, bool& unordered) {
  unordered = false;
  if (a.is_float() || b.is_float()) {
    const double x = a.as_float(), y = b.as_float();
    if (std::isnan(x) || std::isnan(y)) {
      unordered = true;
      return 0;
    }
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const i128 x = a.as_int(), y = b.as_int();
  return x < y ? -1 : x > y ? 1 : 0;
}

}  // namespace

std::optional<Arg> exec_alu(Op op, DType dtype, std::span<const Arg> srcs) {
  for (const Arg& a : srcs)
    if (!a.is_number()) return std::nullopt;  // Invalid and friends never fold
  const OpInfo& info = op_info(op);
  if (!info.is_alu() || !info.accepts_arity(static_cast<int>(srcs.size()))) return std::nullopt;
  if (op == Op::Where) return truthy(srcs[0]) ? srcs[1] : srcs[2];
  if (groups::comparison().contains(op)) {
    bool unordered = false;
    const int c = compare(srcs[0], srcs[1], unordered);
    if (op == Op::CmpLt) return Arg::boolean(!unordered && c < 0);
    if (op == Op::CmpNe) return Arg::boolean(unordered || c != 0);
    return Arg::boolean(!unordered && c == 0);
  }
  const DType s = dtype.scalar_type();
  if (s.is_bool()) {
    const bool a = truthy(srcs[0]), b = srcs.size() > 1 && truthy(srcs[1]);
    switch (op) {
      case Op::And:
      case Op::Mul:
        return Arg::boolean(a && b);
      case Op::Or:
      case Op::Add:
      case Op::Max:
        return Arg::boolean(a || b);
      case Op::Xor:
        return Arg::boolean(a != b);
      case Op::Trunc:  // a bool is its own integer part (tinyspec)
        return Arg::boolean(a);
      default:
        return std::nullopt;
    }
  }
  if (s.is_int()) return int_alu(op, s, srcs);
  if (s.is_float()) return float_alu(op, s, srcs);
  return std::nullopt;
}

uint64_t threefry2x32(uint64_t counter, uint64_t key) {
  static const int kRot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const auto k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  uint32_t x0 = static_cast<uint32_t>(counter) + k0, x1 = static_cast<uint32_t>(counter >> 32) + k1;
  for (int r = 0; r < 20; ++r) {
    x0 += x1;
    x1 = (x1 << kRot[r % 8]) | (x1 >> (32 - kRot[r % 8]));
    x1 ^= x0;
    if (r % 4 == 3) {  // the key injection after every fourth round
      const int s = r / 4 + 1;
      x0 += ks[s % 3];
      x1 += ks[(s + 1) % 3] + static_cast<uint32_t>(s);
    }
  }
  return static_cast<uint64_t>(x1) << 32 | x0;
}

Arg cast_value(DType dtype, const Arg& v) {
  const DType s = dtype.scalar_type();
  if (s.is_bool()) return Arg::boolean(v.is_float() ? v.as_float() != 0 : v.as_int() != 0);
  if (s.is_int()) {
    if (v.is_float()) {
      const double f = v.as_float();
      // truncated toward zero, then wrapped like integer arithmetic; NaN, infinities and
      // magnitudes of 2^119 or more give 0 (spec/tinyspec.tex, the CPU renderer does the same)
      return Arg::integer(std::isfinite(f) && std::fabs(f) < 0x1p119
                              ? truncate_int(s, static_cast<i128>(std::trunc(f)))
                              : 0);
    }
    return Arg::integer(truncate_int(s, v.as_int()));
  }
  return Arg::real(truncate_float(s, v.as_float()));
}

}  // namespace tinyrw

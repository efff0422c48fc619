#include "ir/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

namespace tinyrw {

namespace {

struct ScalarFacts {
  ScalarKind kind;
  const char* name;  // our canonical name
  const char* attr;  // tinygrad's attribute name used in repr (the last alias)
  int itemsize;
  int priority;
  char fmt;
};

constexpr std::array<ScalarFacts, 15> kScalars = {{
    {ScalarKind::Void, "void", "void", 0, -1, 0},
    {ScalarKind::Bool, "bool", "bool", 1, 0, '?'},
    {ScalarKind::Int8, "int8", "char", 1, 1, 'b'},
    {ScalarKind::Int16, "int16", "short", 2, 3, 'h'},
    {ScalarKind::Int32, "int32", "int", 4, 5, 'i'},
    {ScalarKind::Int64, "int64", "long", 8, 7, 'q'},
    {ScalarKind::UInt8, "uint8", "uchar", 1, 2, 'B'},
    {ScalarKind::UInt16, "uint16", "ushort", 2, 4, 'H'},
    {ScalarKind::UInt32, "uint32", "uint", 4, 6, 'I'},
    {ScalarKind::UInt64, "uint64", "ulong", 8, 8, 'Q'},
    {ScalarKind::Float16, "float16", "half", 2, 11, 'e'},
    {ScalarKind::BFloat16, "bfloat16", "bfloat16", 2, 12, 0},
    {ScalarKind::Float32, "float32", "float", 4, 13, 'f'},
    {ScalarKind::Float64, "float64", "double", 8, 14, 'd'},
    {ScalarKind::Index, "index", "index", 8, -1, 0},
}};

const ScalarFacts& facts(ScalarKind k) { return kScalars[static_cast<size_t>(k)]; }

// Owns every DType ever made; entries are never freed, so handles stay valid for the process.
class DTypeTable {
 public:
  DTypeTable() {
    for (const auto& f : kScalars) {
      scalars_[static_cast<size_t>(f.kind)] =
          add(DTypeData{0, f.kind, 1, nullptr, nullptr, AddrSpace::Global, -1, f.name});
    }
  }
  const DTypeData* scalar(ScalarKind k) const { return scalars_[static_cast<size_t>(k)]; }
  const DTypeData* get(ScalarKind k, int count, const DTypeData* base, AddrSpace space,
                       int64_t size) {
    if (!base && count == 1) return scalar(k);
    std::lock_guard lock(mu_);
    auto key = std::make_tuple(k, count, base, space, size);
    if (auto it = derived_.find(key); it != derived_.end()) return it->second;
    std::string name;
    if (base) {
      name = base->name + ".ptr(" + std::to_string(size) +
             (space == AddrSpace::Local ? ", local"
              : space == AddrSpace::Reg ? ", reg"
                                        : "") +
             ")";
    } else {
      name = std::string(facts(k).name) + ".vec(" + std::to_string(count) + ")";
    }
    const DTypeData* d = add(DTypeData{0, k, count, base, nullptr, space, size, name});
    derived_.emplace(key, d);
    return d;
  }

 private:
  // Stores a new type and gives it the next id.
  const DTypeData* add(DTypeData d) {
    if (store_.size() >= kMaxDTypes) {
      throw std::length_error(fmt::format(
          "cannot make dtype {}: a process holds at most {} distinct dtypes", d.name, kMaxDTypes));
    }
    d.id = static_cast<uint16_t>(store_.size());
    DTypeData* p = &store_.emplace_back(std::move(d));
    p->scalar = p->count > 1 ? scalar(p->kind) : p;
    g_dtype_by_id[p->id] = p;
    return p;
  }

  std::mutex mu_;
  std::deque<DTypeData> store_;
  std::array<const DTypeData*, kScalars.size()> scalars_{};
  std::map<std::tuple<ScalarKind, int, const DTypeData*, AddrSpace, int64_t>, const DTypeData*>
      derived_;
};

DTypeTable& table() {
  static DTypeTable t;
  return t;
}

}  // namespace

const DTypeData* g_dtype_by_id[kMaxDTypes] = {};

DType::DType() : d_(table().scalar(ScalarKind::Void)) {}
DType DType::scalar(ScalarKind kind) { return DType(table().scalar(kind)); }

std::optional<DType> DType::from_name(std::string_view name) {
  for (const auto& f : kScalars) {
    if (name == f.name || name == f.attr) return scalar(f.kind);
  }
  static const std::pair<std::string_view, ScalarKind> kAliases[] = {
      {"int", ScalarKind::Int32},      {"float", ScalarKind::Float32},
      {"double", ScalarKind::Float64}, {"half", ScalarKind::Float16},
      {"long", ScalarKind::Int64},     {"weakint", ScalarKind::Index},
  };
  for (const auto& [alias, kind] : kAliases) {
    if (name == alias) return scalar(kind);
  }
  return std::nullopt;
}

DType DType::vec(int n) const {
  if (n == 1 || is_void()) return *this;
  if (count() != 1 || is_ptr() || n < 1)
    throw std::invalid_argument("cannot make a vector of " + std::string(name()) + " with " +
                                std::to_string(n) + " lanes");
  return DType(table().get(d_->kind, n, nullptr, AddrSpace::Global, -1));
}

DType DType::ptr(AddrSpace space, int64_t size) const {
  if (is_ptr())
    throw std::invalid_argument("cannot make a pointer to pointer type " + std::string(name()));
  return DType(table().get(d_->kind, 1, d_, space, size));
}

int DType::itemsize() const { return is_ptr() ? 8 : facts(d_->kind).itemsize * d_->count; }
int DType::priority() const { return facts(d_->kind).priority; }
char DType::fmt() const { return count() == 1 && !is_ptr() ? facts(d_->kind).fmt : 0; }
std::string_view DType::name() const { return d_->name; }

std::string DType::repr() const {
  if (is_ptr()) {
    std::string r = base().repr() + ".ptr(" + std::to_string(d_->size);
    if (d_->space == AddrSpace::Local) r += ", AddrSpace.LOCAL";
    if (d_->space == AddrSpace::Reg) r += ", AddrSpace.REG";
    return r + ")";
  }
  std::string r = std::string("dtypes.") + facts(d_->kind).attr;
  if (d_->count > 1) r += ".vec(" + std::to_string(d_->count) + ")";
  return r;
}

i128 DType::int_min() const {
  const ScalarKind k = d_->kind;
  if (k == ScalarKind::Index) return -kInfinity;
  if (k == ScalarKind::Bool || dtype_kind::is_unsigned(k)) return 0;
  if (dtype_kind::is_int(k)) return -(static_cast<i128>(1) << (facts(k).itemsize * 8 - 1));
  return -kInfinity;
}
i128 DType::int_max() const {
  const ScalarKind k = d_->kind;
  if (k == ScalarKind::Index) return kInfinity;
  if (k == ScalarKind::Bool) return 1;
  if (dtype_kind::is_unsigned(k)) return (static_cast<i128>(1) << (facts(k).itemsize * 8)) - 1;
  if (dtype_kind::is_int(k)) return (static_cast<i128>(1) << (facts(k).itemsize * 8 - 1)) - 1;
  return kInfinity;
}
double DType::float_min() const { return -std::numeric_limits<double>::infinity(); }
double DType::float_max() const { return std::numeric_limits<double>::infinity(); }

namespace dtypes {
const DType void_ = DType::scalar(ScalarKind::Void);
const DType bool_ = DType::scalar(ScalarKind::Bool);
const DType int8 = DType::scalar(ScalarKind::Int8);
const DType int16 = DType::scalar(ScalarKind::Int16);
const DType int32 = DType::scalar(ScalarKind::Int32);
const DType int64 = DType::scalar(ScalarKind::Int64);
const DType uint8 = DType::scalar(ScalarKind::UInt8);
const DType uint16 = DType::scalar(ScalarKind::UInt16);
const DType uint32 = DType::scalar(ScalarKind::UInt32);
const DType uint64 = DType::scalar(ScalarKind::UInt64);
const DType float16 = DType::scalar(ScalarKind::Float16);
const DType bfloat16 = DType::scalar(ScalarKind::BFloat16);
const DType float32 = DType::scalar(ScalarKind::Float32);
const DType float64 = DType::scalar(ScalarKind::Float64);
const DType index = DType::scalar(ScalarKind::Index);
}  // namespace dtypes

// ---- promotion ---------------------------------------------------------------------------------

namespace {

using KindSet = uint32_t;  // bit per ScalarKind
constexpr KindSet bit(ScalarKind k) { return 1u << static_cast<unsigned>(k); }

// Direct parents in the promotion lattice. index (the weak int of literals and index math) sits
// between bool and the 8-bit ints, so an index operand adopts the other operand's int type.
KindSet parents(ScalarKind k) {
  using S = ScalarKind;
  switch (k) {
    case S::Bool:
      return bit(S::Index);
    case S::Index:
      return bit(S::Int8) | bit(S::UInt8);
    case S::Int8:
      return bit(S::Int16);
    case S::Int16:
      return bit(S::Int32);
    case S::Int32:
      return bit(S::Int64);
    case S::Int64:
      return bit(S::UInt64);
    case S::UInt8:
      return bit(S::Int16) | bit(S::UInt16);
    case S::UInt16:
      return bit(S::Int32) | bit(S::UInt32);
    case S::UInt32:
      return bit(S::Int64) | bit(S::UInt64);
    case S::UInt64:
      return bit(S::Float16) | bit(S::BFloat16);
    case S::Float16:
    case S::BFloat16:
      return bit(S::Float32);
    case S::Float32:
      return bit(S::Float64);
    default:
      return 0;
  }
}

KindSet ancestors(ScalarKind k) {
  KindSet out = bit(k);
  KindSet p = parents(k);
  for (unsigned i = 0; i < kScalars.size(); ++i) {
    if (p & (1u << i)) out |= ancestors(static_cast<ScalarKind>(i));
  }
  return out;
}

}  // namespace

DType least_upper_dtype(std::span<const DType> types) {
  if (types.empty()) throw std::invalid_argument("least_upper_dtype of no types");
  KindSet common = ~0u;
  for (const DType& t : types) {
    if (t.is_ptr() || t.is_void()) {
      throw std::invalid_argument("no promotion for type " + std::string(t.name()));
    }
    common &= ancestors(t.kind());
  }
  // One of the types that all the others promote to is the answer itself (bool with bool is
  // bool, not the index type the lattice puts above it).
  for (const DType& t : types)
    if (common & (1u << static_cast<unsigned>(t.kind()))) return t;
  // Lowest priority wins; ties broken by itemsize, as tinygrad orders dtypes.
  std::optional<ScalarKind> best;
  for (unsigned i = 0; i < kScalars.size(); ++i) {
    if (!(common & (1u << i))) continue;
    const auto k = static_cast<ScalarKind>(i);
    if (!best || std::make_pair(facts(k).priority, facts(k).itemsize) <
                     std::make_pair(facts(*best).priority, facts(*best).itemsize)) {
      best = k;
    }
  }
  if (!best) throw std::invalid_argument("types have no common promotion");
  return DType::scalar(*best);
}

DType least_upper_dtype(DType a, DType b) {
  const DType ts[] = {a, b};
  return least_upper_dtype(ts);
}

DType least_upper_float(DType t) {
  return t.is_float() ? t : least_upper_dtype(t, dtypes::default_float());
}

DType sum_acc_dtype(DType t) {
  if (t.is_unsigned()) return least_upper_dtype(t, dtypes::uint32);
  if (t.is_int() || t.is_bool()) return least_upper_dtype(t, dtypes::int32);
  return least_upper_dtype(t, dtypes::float32);
}

bool can_safe_cast(DType from, DType to) {
  if (from == to || from.is_bool()) return true;
  using S = ScalarKind;
  KindSet ok = 0;
  switch (to.kind()) {
    case S::Index:
      ok = bit(S::Int8) | bit(S::Int16) | bit(S::Int32) | bit(S::Int64) | bit(S::UInt8) |
           bit(S::UInt16) | bit(S::UInt32) | bit(S::UInt64);
      break;
    case S::Float64:
      ok = bit(S::Float32) | bit(S::Float16) | bit(S::BFloat16) | bit(S::UInt32) | bit(S::UInt16) |
           bit(S::UInt8) | bit(S::Int32) | bit(S::Int16) | bit(S::Int8);
      break;
    case S::Float32:
      ok = bit(S::Float16) | bit(S::BFloat16) | bit(S::UInt16) | bit(S::UInt8) | bit(S::Int16) |
           bit(S::Int8);
      break;
    case S::Float16:
      ok = bit(S::UInt8) | bit(S::Int8);
      break;
    case S::Int64:
      ok = bit(S::UInt32) | bit(S::UInt16) | bit(S::UInt8) | bit(S::Int32) | bit(S::Int16) |
           bit(S::Int8);
      break;
    case S::Int32:
      ok = bit(S::UInt16) | bit(S::UInt8) | bit(S::Int16) | bit(S::Int8);
      break;
    case S::Int16:
      ok = bit(S::UInt8) | bit(S::Int8);
      break;
    case S::UInt64:
      ok = bit(S::UInt32) | bit(S::UInt16) | bit(S::UInt8);
      break;
    case S::UInt32:
      ok = bit(S::UInt16) | bit(S::UInt8);
      break;
    case S::UInt16:
      ok = bit(S::UInt8);
      break;
    default:
      ok = 0;
  }
  return from.count() == to.count() && !from.is_ptr() && !to.is_ptr() && (ok & bit(from.kind()));
}

// ---- constants ---------------------------------------------------------------------------------

i128 truncate_int(DType t, i128 v) {
  const ScalarKind k = t.kind();
  if (k == ScalarKind::Bool) return v != 0;
  if (!dtype_kind::is_int(k)) return saturate(v);  // index: exact, only bounded by "infinity"
  const int bits = facts(k).itemsize * 8;
  const u128 mask = (static_cast<u128>(1) << bits) - 1;
  u128 u = static_cast<u128>(v) & mask;
  if (!dtype_kind::is_unsigned(k) && (u >> (bits - 1)) & 1) {
    return static_cast<i128>(u) - (static_cast<i128>(1) << bits);
  }
  return static_cast<i128>(u);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while (!(mant & 0x400));
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
  }
  if (absx >= 0x477ff000u) return sign | 0x7c00;  // rounds past 65504: overflow to inf
  if (absx <
      0x38800000u) {  // subnormal half or zero: round-to-nearest-even on the shifted mantissa
    if (absx < 0x33000000u) return sign;  // below half of the smallest subnormal
    const uint32_t e = absx >> 23;
    const uint32_t mant = (absx & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 - (e - 112)
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent by 112
  r = (r + 0xfff + ((r >> 13) & 1)) >> 13;
  return sign | static_cast<uint16_t>(r);
}

float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bfloat16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  if (std::isinf(f)) return static_cast<uint16_t>(u >> 16);
  u = u + 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

double truncate_float(DType t, double v) {
  switch (t.kind()) {
    case ScalarKind::Float16:
      return half_to_float(float_to_half(static_cast<float>(v)));
    case ScalarKind::BFloat16:
      return bfloat16_to_float(float_to_bfloat16(static_cast<float>(v)));
    case ScalarKind::Float32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

std::string to_string(i128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  u128 u = neg ? static_cast<u128>(-(v + 1)) + 1 : static_cast<u128>(v);
  std::string s;
  while (u) {
    s.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (neg) s.push_back('-');
  return {s.rbegin(), s.rend()};
}

std::string_view addrspace_name(AddrSpace space) {
  switch (space) {
    case AddrSpace::Global:
      return "GLOBAL";
    case AddrSpace::Local:
      return "LOCAL";
    case AddrSpace::Reg:
      return "REG";
  }
  return "?";
}

}  // namespace tinyrw

// Data types: scalars, vectors and pointers, interned so that equal types compare by pointer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ir/int128.h"

namespace tinyrw {

enum class ScalarKind : uint8_t {
  Void,
  Bool,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Index,  // the weak integer type of index math: unbounded for range analysis
};

enum class AddrSpace : uint8_t { Global, Local, Reg };
inline constexpr int kNumAddrSpaces = 3;
// "GLOBAL", "LOCAL", "REG": as a ParamArg's addrspace field spells it (none means GLOBAL)
std::string_view addrspace_name(AddrSpace space);

// The interned description a DType points to (ir/dtype.cpp makes them; never freed). Defined
// here so the accessors below inline: rule matchers test types on every node they visit.
struct DTypeData {
  uint16_t id;  // its index in g_dtype_by_id
  ScalarKind kind;
  int count;                // vector lanes
  const DTypeData* base;    // pointee, for pointers
  const DTypeData* scalar;  // the element type of a vector; the type itself otherwise
  AddrSpace space;
  int64_t size;  // pointer buffer size
  std::string name;
};

namespace dtype_kind {
inline bool is_int(ScalarKind k) { return k >= ScalarKind::Int8 && k <= ScalarKind::UInt64; }
inline bool is_unsigned(ScalarKind k) { return k >= ScalarKind::UInt8 && k <= ScalarKind::UInt64; }
inline bool is_float(ScalarKind k) { return k >= ScalarKind::Float16 && k <= ScalarKind::Float64; }
}  // namespace dtype_kind

// A handle to an interned, immutable type description; cheap to copy and compare.
class DType {
 public:
  DType();  // void
  static DType scalar(ScalarKind kind);
  static std::optional<DType> from_name(std::string_view name);  // "float32", "float", "int", ...

  DType vec(int count) const;  // count 1 returns the scalar itself
  DType ptr(AddrSpace space = AddrSpace::Global, int64_t size = -1) const;

  // of the scalar element (the base's element for pointers)
  ScalarKind kind() const { return d_->kind; }
  int count() const { return d_->count; }  // vector width (1 for scalars and pointers)
  // element type of a vector; the type itself otherwise
  DType scalar_type() const { return DType(d_->scalar); }
  bool is_vector() const { return count() > 1; }
  bool is_ptr() const { return d_->base != nullptr; }
  DType base() const { return d_->base ? DType(d_->base) : *this; }  // pointee of a pointer
  AddrSpace addrspace() const { return d_->space; }
  // element count of a pointer's buffer, -1 when unknown
  int64_t ptr_size() const { return d_->size; }

  bool is_void() const { return kind() == ScalarKind::Void && !is_ptr(); }
  bool is_bool() const { return !is_ptr() && d_->kind == ScalarKind::Bool; }
  // signed, unsigned or index (not bool)
  bool is_int() const {
    return !is_ptr() && (dtype_kind::is_int(d_->kind) || d_->kind == ScalarKind::Index);
  }
  bool is_unsigned() const { return !is_ptr() && dtype_kind::is_unsigned(d_->kind); }
  bool is_float() const { return !is_ptr() && dtype_kind::is_float(d_->kind); }
  bool is_index() const { return !is_ptr() && d_->kind == ScalarKind::Index; }

  int itemsize() const;           // bytes of one element (vector: all lanes; pointer: 8)
  int priority() const;           // promotion priority, as in tinygrad
  char fmt() const;               // struct-module format character, 0 when none
  std::string_view name() const;  // "float32", "int32.vec(4)", ...
  std::string repr() const;       // "dtypes.float", "dtypes.int.vec(4)", "dtypes.float.ptr(16)"

  // Exact bounds of integer and bool scalars (index: +-kInfinity). Float bounds are +-inf.
  i128 int_min() const;
  i128 int_max() const;
  double float_min() const;
  double float_max() const;

  // A 16-bit number for this type (UOp nodes store it; at most kMaxDTypes types exist);
  // from_id(id()) is this type.
  uint16_t id() const { return d_->id; }
  static DType from_id(uint16_t id);

  bool operator==(const DType& o) const { return d_ == o.d_; }
  bool operator!=(const DType& o) const { return d_ != o.d_; }
  size_t hash() const { return reinterpret_cast<size_t>(d_); }
  const DTypeData* data() const { return d_; }

 private:
  friend class Arg;  // stores the interned pointer inline
  explicit DType(const DTypeData* d) : d_(d) {}
  const DTypeData* d_;
};

namespace dtypes {
extern const DType void_, bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16,
    bfloat16, float32, float64, index;
inline const DType& default_float() { return float32; }
inline const DType& default_int() { return int32; }
}  // namespace dtypes

// The smallest type every argument promotes to along tinygrad's promotion lattice.
DType least_upper_dtype(std::span<const DType> types);
DType least_upper_dtype(DType a, DType b);
// least_upper_dtype, but never an integer: ints and bools promote to the default float.
DType least_upper_float(DType t);
// The accumulator type a sum over `t` uses (ints widen to 32 bits, halves to float32).
DType sum_acc_dtype(DType t);
// True when every value of `from` is representable in `to`.
bool can_safe_cast(DType from, DType to);

// Constants: wrap an integer to the dtype's width (two's complement), round a double to the
// dtype's precision (float16/bfloat16/float32), map anything to bool.
i128 truncate_int(DType t, i128 v);
double truncate_float(DType t, double v);
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

// How many distinct types a process may make (each UOp node names its type in 16 bits).
inline constexpr size_t kMaxDTypes = size_t{1} << 16;
// Every type made so far, by id (ir/dtype.cpp fills it).
extern const DTypeData* g_dtype_by_id[kMaxDTypes];
inline DType DType::from_id(uint16_t id) { return DType(g_dtype_by_id[id]); }

}  // namespace tinyrw

template <>
struct std::hash<tinyrw::DType> {
  size_t operator()(const tinyrw::DType& d) const { return d.hash(); }
};

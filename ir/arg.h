// Arg: the typed, immutable value a UOp carries (tinygrad's `arg`), and its tag.
//
// An Arg is one 64-bit word (NaN-boxed): a double is stored as itself (every nan is the one
// canonical quiet nan), and the negative-nan space holds the other kinds: ints that fit 48 bits,
// dtypes, bools, ops, None and Invalid inline; strings, tuples, records and larger ints as a
// pointer to one reference-counted heap block. Eight bytes keep the UOp node small. Equality is
// structural and exact: floats compare by bit pattern, so -0.0 != 0.0 and nan == nan (needed for
// hash-consing).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "ir/int128.h"
#include "ir/ops.h"

namespace tinyrw {

struct ArgHeap;

class Arg {
 public:
  enum class Kind : uint8_t { None, Int, Float, Bool, String, Tuple, DType, Op, Record, Invalid };

  Arg() : w_(immediate(Kind::None)) {}
  static Arg integer(i128 v);
  static Arg real(double v);
  static Arg boolean(bool v);
  static Arg string(std::string_view s);
  static Arg tuple(std::vector<Arg> items);
  static Arg tuple(std::initializer_list<Arg> items) { return tuple(std::vector<Arg>(items)); }
  static Arg dtype(DType d);
  static Arg op(Op o);
  // A structured value with named fields, e.g. ParamArg(slot=0, dtype=float32, device="CPU").
  static Arg record(std::string_view type_name, std::vector<std::pair<std::string, Arg>> fields);
  // The marker value of masked index lanes (tinygrad's Invalid).
  static Arg invalid();

  Arg(const Arg& o) : w_(o.w_) {
    if (on_heap()) retain();
  }
  Arg(Arg&& o) noexcept : w_(o.w_) { o.w_ = immediate(Kind::None); }
  Arg& operator=(const Arg& o) {
    const uint64_t w = o.w_;  // read first: o may be this, and release() clears the word
    if (o.on_heap()) o.retain();
    if (on_heap()) release();
    w_ = w;
    return *this;
  }
  Arg& operator=(Arg&& o) noexcept {
    if (this != &o) {
      if (on_heap()) release();
      w_ = o.w_;
      o.w_ = immediate(Kind::None);
    }
    return *this;
  }
  ~Arg() {
    if (on_heap()) release();
  }

  Kind kind() const {
    switch (tag()) {
      case kTagHeap:
        return heap_kind();
      case kTagInt:
        return Kind::Int;
      case kTagDType:
        return Kind::DType;
      case kTagImmediate:
        return static_cast<Kind>(w_ & 0xFF);
      default:
        return Kind::Float;
    }
  }
  bool is_none() const { return w_ == immediate(Kind::None); }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return tag() < kTagHeap; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_tuple() const { return kind() == Kind::Tuple; }
  bool is_dtype() const { return kind() == Kind::DType; }
  bool is_op() const { return kind() == Kind::Op; }
  bool is_record() const { return kind() == Kind::Record; }
  bool is_invalid() const { return kind() == Kind::Invalid; }

  // Accessors throw std::logic_error naming the expected and actual kinds on mismatch.
  i128 as_int() const;      // ints and bools
  double as_float() const;  // floats, ints and bools
  bool as_bool() const;     // bools and ints (nonzero)
  const std::string& as_string() const;
  std::span<const Arg> items() const;  // tuples
  DType as_dtype() const;
  Op as_op() const;
  const std::string& record_type() const;
  const Arg& field(std::string_view name) const;  // records; throws if absent
  const Arg* find_field(std::string_view name) const;
  std::span<const std::pair<std::string, Arg>> fields() const;

  size_t hash() const;
  bool operator==(const Arg& o) const;
  bool operator!=(const Arg& o) const { return !(*this == o); }

  // Python-like text: 3, 1.5, inf, nan, True, 'abc', (1, 2), dtypes.float, Ops.ADD,
  // ParamArg(slot=0, ...), Invalid.
  std::string repr() const;

 private:
  // The top 16 bits of the word select the representation; below kTagHeap it is a double.
  static constexpr uint64_t kTagHeap = 0xFFF9, kTagInt = 0xFFFA, kTagDType = 0xFFFB,
                            kTagImmediate = 0xFFFC;
  static constexpr uint64_t kPayloadMask = (uint64_t{1} << 48) - 1;
  static constexpr uint64_t word(uint64_t tag, uint64_t payload) {
    return (tag << 48) | (payload & kPayloadMask);
  }
  // Immediates (None, Bool, Op, Invalid) keep their kind in the low byte, the value above it.
  static constexpr uint64_t immediate(Kind k, uint64_t value = 0) {
    return word(kTagImmediate, (value << 8) | static_cast<uint64_t>(k));
  }
  uint64_t tag() const { return w_ >> 48; }
  bool on_heap() const { return tag() == kTagHeap; }
  ArgHeap* heap() const { return reinterpret_cast<ArgHeap*>(w_ & kPayloadMask); }
  Kind heap_kind() const;
  static Arg from_heap(ArgHeap* p);
  void release();       // drops one reference to the heap block
  void retain() const;  // adds one
  uint64_t w_;
};

std::string_view kind_name(Arg::Kind k);

}  // namespace tinyrw

// Arg: the typed, immutable value a UOp carries (tinygrad's `arg`), and its tag.
//
// Small values (ints that fit 64 bits, floats, bools, dtypes, ops) live inline; strings, tuples,
// big integers and records share one reference-counted heap block. Equality is structural and
// exact: floats compare by bit pattern, so -0.0 != 0.0 and nan == nan (needed for hash-consing).
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

  Arg() : kind_(Kind::None), i_(0) {}
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

  Arg(const Arg& o);
  Arg(Arg&& o) noexcept;
  Arg& operator=(const Arg& o);
  Arg& operator=(Arg&& o) noexcept;
  ~Arg();

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_tuple() const { return kind_ == Kind::Tuple; }
  bool is_dtype() const { return kind_ == Kind::DType; }
  bool is_op() const { return kind_ == Kind::Op; }
  bool is_record() const { return kind_ == Kind::Record; }
  bool is_invalid() const { return kind_ == Kind::Invalid; }

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
  void release();
  void retain() const;
  bool on_heap() const { return heap_; }
  Kind kind_;
  bool heap_ = false;  // payload is p_ (strings, tuples, records, ints outside int64)
  union {
    int64_t i_;
    double f_;
    bool b_;
    const DTypeData* d_;
    Op o_;
    ArgHeap* p_;
  };
};

std::string_view kind_name(Arg::Kind k);

}  // namespace tinyrw

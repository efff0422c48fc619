// Ops and op groups, generated from ops.def (the single source of truth).
#pragma once

#include <bitset>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

namespace tinyrw {

enum class Op : uint8_t {
#define OP(Name, PY, Cat, MinSrc, MaxSrc, Groups) Name,
#include "ir/ops.def"
#undef OP
};

inline constexpr int kNumOps = 0
#define OP(Name, PY, Cat, MinSrc, MaxSrc, Groups) +1
#include "ir/ops.def"
#undef OP
    ;

enum class OpCategory : uint8_t {
  Source,      // leaves and definitions: constants, buffers, params, variables
  Movement,    // view changes: reshape, permute, expand, pad, shrink, flip, stack
  Reduce,      // reductions
  Call,        // calls, functions and their outputs
  Load,        // reads: index, load, copy
  Store,       // writes
  Ordering,    // sink, after, group, range, end, linear
  Unary,       // elementwise with one source
  Binary,      // elementwise with two sources
  Ternary,     // elementwise with three sources
  Decomposed,  // elementwise ops that backends may lower to other ops
  Marker,      // contiguous, detach, stage, noop
  Codegen,     // program-level ops: special, if, barrier, custom, program
};

enum OpGroupBit : uint32_t {
  G_UNARY = 1u << 0,
  G_BINARY = 1u << 1,
  G_TERNARY = 1u << 2,
  G_ELEMENTWISE = 1u << 3,  // CAST/BITCAST; the ALU ops are added automatically
  G_COMM = 1u << 4,
  G_ASSOC = 1u << 5,
  G_IDEMP = 1u << 6,
  G_CMP = 1u << 7,
  G_REDUCE_OP = 1u << 8,
  G_MOVEMENT = 1u << 9,
  G_IRREDUCIBLE = 1u << 10,
  G_DEFINES = 1u << 11,
};

struct OpInfo {
  Op op;
  std::string_view name;     // "Add"
  std::string_view py_name;  // "ADD"
  OpCategory category;
  int min_src;
  int max_src;  // -1: unbounded
  uint32_t groups;

  bool is_commutative() const { return groups & G_COMM; }
  bool is_alu() const { return groups & (G_UNARY | G_BINARY | G_TERNARY); }
  bool accepts_arity(int n) const { return n >= min_src && (max_src < 0 || n <= max_src); }
};

const OpInfo& op_info(Op op);
inline std::string_view op_name(Op op) { return op_info(op).name; }
std::optional<Op> op_from_name(std::string_view name);  // accepts "Add" and "ADD"
std::string_view category_name(OpCategory c);

// A set of ops (tinygrad's GroupOp sets and user-defined groups).
class OpSet {
 public:
  constexpr OpSet() = default;
  OpSet(std::initializer_list<Op> ops) {
    for (Op o : ops) add(o);
  }
  static OpSet all();
  static OpSet with_groups(uint32_t any_of_bits);

  OpSet& add(Op o) {
    bits_.set(static_cast<size_t>(o));
    return *this;
  }
  bool contains(Op o) const { return bits_.test(static_cast<size_t>(o)); }
  bool empty() const { return bits_.none(); }
  size_t size() const { return bits_.count(); }
  OpSet operator|(const OpSet& o) const { return OpSet(bits_ | o.bits_); }
  OpSet operator&(const OpSet& o) const { return OpSet(bits_ & o.bits_); }
  bool operator==(const OpSet& o) const { return bits_ == o.bits_; }

  template <class F>
  void for_each(F&& f) const {
    for (int i = 0; i < kNumOps; ++i)
      if (bits_.test(static_cast<size_t>(i))) f(static_cast<Op>(i));
  }

 private:
  explicit OpSet(std::bitset<kNumOps> b) : bits_(b) {}
  std::bitset<kNumOps> bits_;
};

// tinygrad's GroupOp sets.
namespace groups {
const OpSet& unary();
const OpSet& binary();
const OpSet& ternary();
const OpSet& alu();
const OpSet& elementwise();
const OpSet& commutative();
const OpSet& associative();
const OpSet& idempotent();
const OpSet& comparison();
const OpSet& reduce_ops();  // ops allowed as the op of a REDUCE
const OpSet& movement();
const OpSet& irreducible();
const OpSet& defines();
}  // namespace groups

}  // namespace tinyrw

#include "ir/ops.h"

#include <array>

namespace tinyrw {

namespace {
constexpr std::array<OpInfo, kNumOps> kOpTable = {{
#define OP(Name, PY, Cat, MinSrc, MaxSrc, Groups) \
  {Op::Name, #Name, #PY, OpCategory::Cat, MinSrc, MaxSrc, static_cast<uint32_t>(Groups)},
#include "ir/ops.def"
#undef OP
}};

// The table must list ops in enum order so op_info can index it.
constexpr bool table_in_enum_order() {
  for (int i = 0; i < kNumOps; ++i)
    if (static_cast<int>(kOpTable[i].op) != i) return false;
  return true;
}
static_assert(table_in_enum_order());
}  // namespace

const OpInfo& op_info(Op op) { return kOpTable[static_cast<size_t>(op)]; }

std::optional<Op> op_from_name(std::string_view name) {
  for (const OpInfo& info : kOpTable)
    if (info.name == name || info.py_name == name) return info.op;
  return std::nullopt;
}

std::string_view category_name(OpCategory c) {
  switch (c) {
    case OpCategory::Source:
      return "source";
    case OpCategory::Movement:
      return "movement";
    case OpCategory::Reduce:
      return "reduce";
    case OpCategory::Call:
      return "call";
    case OpCategory::Load:
      return "load";
    case OpCategory::Store:
      return "store";
    case OpCategory::Ordering:
      return "ordering";
    case OpCategory::Unary:
      return "elementwise unary";
    case OpCategory::Binary:
      return "elementwise binary";
    case OpCategory::Ternary:
      return "elementwise ternary";
    case OpCategory::Decomposed:
      return "decomposed elementwise";
    case OpCategory::Marker:
      return "marker";
    case OpCategory::Codegen:
      return "codegen";
  }
  return "?";
}

OpSet OpSet::all() {
  OpSet s;
  for (int i = 0; i < kNumOps; ++i) s.add(static_cast<Op>(i));
  return s;
}

OpSet OpSet::with_groups(uint32_t any_of_bits) {
  OpSet s;
  for (const OpInfo& info : kOpTable)
    if (info.groups & any_of_bits) s.add(info.op);
  return s;
}

namespace groups {
#define TINYRW_GROUP(fn, bits)                       \
  const OpSet& fn() {                                \
    static const OpSet s = OpSet::with_groups(bits); \
    return s;                                        \
  }
TINYRW_GROUP(unary, G_UNARY)
TINYRW_GROUP(binary, G_BINARY)
TINYRW_GROUP(ternary, G_TERNARY)
TINYRW_GROUP(alu, G_UNARY | G_BINARY | G_TERNARY)
TINYRW_GROUP(elementwise, G_UNARY | G_BINARY | G_TERNARY | G_ELEMENTWISE)
TINYRW_GROUP(commutative, G_COMM)
TINYRW_GROUP(associative, G_ASSOC)
TINYRW_GROUP(idempotent, G_IDEMP)
TINYRW_GROUP(comparison, G_CMP)
TINYRW_GROUP(reduce_ops, G_REDUCE_OP)
TINYRW_GROUP(movement, G_MOVEMENT)
TINYRW_GROUP(irreducible, G_IRREDUCIBLE)
TINYRW_GROUP(defines, G_DEFINES)
#undef TINYRW_GROUP
}  // namespace groups

}  // namespace tinyrw

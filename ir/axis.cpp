#include "ir/axis.h"

#include <fmt/format.h>

#include "ir/uop.h"

namespace tinyrw {

const std::array<AxisTypeInfo, kNumAxisTypes>& axis_types() {
  // Letters and positions as tinygrad's kernel names use them: WEAK and LOOP share 'L', LOCAL and
  // GROUP_REDUCE one position.
  static const std::array<AxisTypeInfo, kNumAxisTypes> kTable = {{
      {AxisType::Device, "DEVICE", 'd', -2},
      {AxisType::Global, "GLOBAL", 'g', 0},
      {AxisType::Warp, "WARP", 'w', 1},
      {AxisType::Local, "LOCAL", 'l', 2},
      {AxisType::Weak, "WEAK", 'L', -1},
      {AxisType::GroupReduce, "GROUP_REDUCE", 'G', 2},
      {AxisType::Reduce, "REDUCE", 'R', 4},
      {AxisType::Upcast, "UPCAST", 'u', 3},
      {AxisType::Unroll, "UNROLL", 'r', 5},
      {AxisType::Thread, "THREAD", 't', 0},
      {AxisType::Placeholder, "PLACEHOLDER", 0, std::nullopt},
      {AxisType::Loop, "LOOP", 'L', -1},
  }};
  return kTable;
}

const AxisTypeInfo& axis_info(AxisType t) { return axis_types()[static_cast<size_t>(t)]; }
std::string_view axis_type_name(AxisType t) { return axis_info(t).name; }

std::optional<AxisType> axis_type_from_name(std::string_view name) {
  for (const AxisTypeInfo& i : axis_types())
    if (i.name == name) return i.type;
  return std::nullopt;
}

AxisType axis_type_of(const UOp& range) {
  if (range.op() != Op::Range)
    throw GraphError(fmt::format("{} has no axis type (not a RANGE)", op_info(range.op()).py_name));
  const Arg& a = range.arg();
  const auto items = a.is_tuple() ? a.items() : std::span<const Arg>{};
  if (items.size() >= 2 && items.back().is_string())
    if (auto t = axis_type_from_name(items.back().as_string())) return *t;
  throw GraphError(fmt::format("RANGE arg {} does not end in an axis type", a.repr()));
}

std::string range_label(const UOp& range) {
  const AxisTypeInfo& info = axis_info(axis_type_of(range));
  std::string out = info.letter ? std::string(1, info.letter) : std::string("p");
  const auto items = range.arg().items();
  for (size_t k = 0; k + 1 < items.size(); ++k) {
    const i128 id = items[k].as_int();
    out += (k ? "_" : "") + (id < 0 ? "m" + to_string(-id) : to_string(id));
  }
  return out;
}

}  // namespace tinyrw

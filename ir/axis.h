// The kind of loop a RANGE is (tinygrad's AxisType): where the loop runs (device, grid, workgroup,
// warp, thread), whether it reduces, and what the optimizer made of it (upcast, unroll). A RANGE's
// arg is (id, ..., type): one or more ints, then the type's name as a string ("WEAK").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tinyrw {

class UOp;

enum class AxisType : uint8_t {
  Device,
  Global,
  Warp,
  Local,
  Weak,  // an output loop the optimizer may still place (what rangeify makes)
  GroupReduce,
  Reduce,
  Upcast,
  Unroll,
  Thread,
  Placeholder,  // a stand-in while kernels are compared; never runs
  Loop,
};
inline constexpr int kNumAxisTypes = 12;

struct AxisTypeInfo {
  AxisType type;
  std::string_view name;        // as stored in the RANGE arg
  char letter;                  // in range names and kernel names; 0 for PLACEHOLDER (none)
  std::optional<int> position;  // the order of axes in a kernel name; none for PLACEHOLDER
};
const std::array<AxisTypeInfo, kNumAxisTypes>& axis_types();
const AxisTypeInfo& axis_info(AxisType t);
std::string_view axis_type_name(AxisType t);
std::optional<AxisType> axis_type_from_name(std::string_view name);

// The type of a RANGE (the last item of its arg); throws GraphError for another op or a bad arg.
AxisType axis_type_of(const UOp& range);
// A RANGE's label: its type's letter and its ids joined by '_' ("L0", "R1_2", "dm1" for id -1).
std::string range_label(const UOp& range);

}  // namespace tinyrw

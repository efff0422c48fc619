// State of one kernel's lowering that rules/rangeify.rw reads through new_ranges().
#pragma once

namespace tinyrw::rw {

struct RangeifyContext {
  int next_axis = 0;  // RANGE axis ids are unique within a kernel
};

}  // namespace tinyrw::rw

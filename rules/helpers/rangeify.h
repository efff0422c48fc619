// State the rangeify helpers share during one kernel's lowering.
#pragma once

namespace tinyrw::rw {

struct RangeifyContext {
  int next_axis = 0;  // RANGE axis ids are unique within a kernel
};

}  // namespace tinyrw::rw

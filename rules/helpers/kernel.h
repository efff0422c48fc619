// The state of the late kernel rules (rules/reduce.rw, rules/devectorizer.rw,
// rules/decompositions.rw, rules/opts.rw)
// that is not a rewrite: the number of accumulator registers given out in the kernel so far, the
// target whose renderer the program is for, and the range a PADTO opt widened.
#pragma once

#include <cstdint>

#include "ir/uop.h"

namespace tinyrw {
struct Target;
}

namespace tinyrw::rw {

struct KernelContext {
  int64_t accumulators = 0;  // register buffers get slots -1, -2, ...
  // what the late decompositions leave to the renderer, and its widest vector access
  const ::tinyrw::Target* target = nullptr;
  UOp padded_range{};       // PADTO: the range now past its size ...
  int64_t padded_size = 0;  // ... and that size
};

}  // namespace tinyrw::rw

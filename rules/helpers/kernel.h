// The state of the late kernel rules (rules/reduce.rw) that is not a rewrite: the number of
// accumulator registers given out in the kernel so far.
#pragma once

#include <cstdint>

namespace tinyrw::rw {

struct KernelContext {
  int64_t accumulators = 0;  // register buffers get slots -1, -2, ...
};

}  // namespace tinyrw::rw

// The state of the late kernel rules (rules/reduce.rw, rules/decompositions.rw) that is not a
// rewrite: the number of accumulator registers given out in the kernel so far, and the target
// whose renderer the program is for.
#pragma once

#include <cstdint>

namespace tinyrw {
struct Target;
}

namespace tinyrw::rw {

struct KernelContext {
  int64_t accumulators = 0;                  // register buffers get slots -1, -2, ...
  const ::tinyrw::Target* target = nullptr;  // what the late decompositions leave to the renderer
};

}  // namespace tinyrw::rw

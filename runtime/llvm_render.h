// Renders a bound kernel (a kernel AST or custom kernel whose PARAM accesses codegen/linearize.h's
// bind_kernel turned into INDEX(BUFFER, i)) as LLVM IR text: one function `i32 kernel(ptr bufs)`
// whose argument is an array of buffer pointers. It returns 0, or the error code of
// an integer division or modulo by zero it met (kernel_error_op names the op): a kernel never
// traps, it runs to the end and the host raises.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/uop.h"

namespace tinyrw {

struct RenderedKernel {
  std::string ir;                    // the module text; the function is named `kernel`
  std::vector<int64_t> input_slots;  // buffer slots in argument order (after the unused 0th)
};

// A custom kernel's or kernel AST's effects (SINK of STORE / END(effect, ranges) / GROUP over
// INDEX(BUFFER, i), values possibly holding REDUCEs, as codegen/linearize.h binds them) as the
// same kind of function; argument 0 is unused, the buffers follow in `input_slots` order.
// END(STORE(INDEX(b, i), REDUCE(...)), ..., r) with a short innermost range r (a matmul's row)
// runs r's loop inside the reduction's, so that LLVM vectorizes it (a matmul walks B's rows).
RenderedKernel render_llvm_effects(const UOp& sink,
                                   const std::vector<std::pair<int64_t, int64_t>>& buffer_sizes);

// The op a kernel's nonzero return value reports (nothing for a code no kernel returns).
std::optional<Op> kernel_error_op(int32_t code);

}  // namespace tinyrw

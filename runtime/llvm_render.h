// Renders a LINEAR program (codegen/linearize.h) as LLVM IR text: one function
// `i32 kernel(ptr bufs, i32 core_id)` whose first argument is an array of buffer pointers and whose
// second is the thread the call runs (SPECIAL core_id: a threaded kernel is called once per
// thread, 0..threads-1; any other is called once with 0). It returns 0, or the
// error code of an integer division or modulo by zero it met (kernel_error_op names the op): a
// kernel never traps, it runs to the end and the host raises.
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
  // DEFINE_VAR names in argument order after the buffers: each argument points at the int64
  // value the launch gives the variable
  std::vector<std::string> variables;
  int64_t threads = 1;  // the calls a launch makes, one per core_id
};

// The program as that function; argument 0 is unused, the buffers follow in `input_slots` order
// (registers, BUFFERs whose addrspace is REG, are the function's own), then the variables.
RenderedKernel render_llvm(const UOp& program);

// The op a kernel's nonzero return value reports (nothing for a code no kernel returns).
std::optional<Op> kernel_error_op(int32_t code);

}  // namespace tinyrw

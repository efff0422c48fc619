// Renders a LINEAR program (codegen/linearize.h) as LLVM IR text.
// For the CPU: one function `i32 kernel(ptr bufs, i32 core_id)` whose first argument is an array of
// buffer pointers and whose second is the thread the call runs (SPECIAL core_id: a threaded kernel
// is called once per thread, 0..threads-1; any other is called once with 0). It returns 0, or the
// error code of an integer division or modulo by zero it met (kernel_error_op names the op): a
// kernel never traps, it runs to the end and the host raises.
// For a GPU (NVPTX for CUDA, AMDGPU for HIP): a kernel `void NAME(ptr addrspace(1) buffers...,
// ptr addrspace(1) error, i64 variables...)` launched over `global_size` workgroups of `local_size`
// threads (SPECIAL gidx0..2 and lidx0..2); a thread that met a division by zero stores its error
// code into the int32 at `error` (left alone otherwise). Shared memory (LOCAL buffers) is
// addrspace 3; BARRIER is the target's workgroup barrier.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/uop.h"

namespace tinyrw {

// What the IR is for: the CPU's JIT, or a GPU kernel for CUDA (NVPTX) or HIP (AMDGPU).
enum class LlvmTarget { Cpu, Nvptx, Amdgpu };

struct RenderedKernel {
  std::string ir;                    // the module text; the function is named `kernel`
  std::vector<int64_t> input_slots;  // buffer slots in argument order (after the unused 0th)
  // DEFINE_VAR names in argument order after the buffers: each argument points at the int64
  // value the launch gives the variable
  std::vector<std::string> variables;
  int64_t threads = 1;  // the calls a launch makes, one per core_id
  std::string name = "kernel";
  // GPU: the workgroups of the launch along x, y, z, and the threads of each
  std::array<int64_t, 3> global_size{1, 1, 1}, local_size{1, 1, 1};
};

// The program as that function; argument 0 is unused, the buffers follow in `input_slots` order
// (registers, BUFFERs whose addrspace is REG, are the function's own), then the variables.
// `name` names a GPU kernel (letters, digits and '_' kept, anything else '_').
RenderedKernel render_llvm(const UOp& program, LlvmTarget target = LlvmTarget::Cpu,
                           const std::string& name = "kernel");

// The op a kernel's nonzero return value reports (nothing for a code no kernel returns).
std::optional<Op> kernel_error_op(int32_t code);

}  // namespace tinyrw

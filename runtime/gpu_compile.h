// Compiling GPU kernels on any machine, with or without a GPU: LLVM 15's NVPTX backend turns a
// kernel's IR (runtime/llvm_render.h) into PTX, which the CUDA driver compiles for its device when
// it loads it (PTX 7.5 at most: every driver since CUDA 11.5 takes it); its AMDGPU backend into an
// object that ld.lld links into the code object the HIP runtime loads. docs/gpu.md says why LLVM
// IR rather than CUDA C: one renderer for the CPU and both GPUs, and no runtime compiler needed to
// check every kernel here.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "ir/uop.h"

namespace tinyrw {

// A compile that needs what this machine lacks (libdevice, from the optional CUDA toolkit).
struct MissingGpuTool : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// PTX for `arch` ("sm_75"; LLVM 15 knows up to sm_86, and a newer device JIT-compiles it). Throws
// std::runtime_error naming the kernel and LLVM's reason when it does not compile, MissingGpuTool
// when it calls libdevice and no CUDA toolkit is installed.
std::string compile_ptx(const std::string& ir, const std::string& arch = "sm_75");

// A linked AMDGPU code object (ELF) for `arch` ("gfx90a", "gfx1030", "gfx1100"), through ld.lld.
// Throws std::runtime_error when LLVM or the linker refuses it, or no ld.lld is installed.
std::string compile_amdgpu(const std::string& ir, const std::string& arch = "gfx90a");

// ptxas (the CUDA toolkit's PTX assembler) on `ptx` for `arch`: nothing when it accepts it or is
// not installed (`ptxas_available`), its message otherwise.
bool ptxas_available();
std::optional<std::string> ptxas_error(const std::string& ptx, const std::string& arch = "sm_75");

// Whether a code object defines kernel `name`: its symbol and its kernel descriptor `name.kd`.
bool code_object_exports(const std::string& elf, const std::string& name);

// With GPU_COMPILE_CHECK=1, every kernel a realize compiles is also lowered for CUDA and HIP (their
// opts and decompositions), rendered and compiled as above (PTX checked by ptxas where installed,
// the code object's kernel looked up): a kernel that would not compile for a GPU is an error here,
// on a machine without one (a kernel that needs libdevice where no CUDA toolkit is installed is
// reported on stderr, its PTX not made). `bound`: the kernel bound to buffers
// (codegen/linearize.h).
bool gpu_compile_check_enabled();
void check_gpu_compiles(const UOp& bound, const std::string& name);

}  // namespace tinyrw

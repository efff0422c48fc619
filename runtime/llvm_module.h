// The LLVM steps the CPU JIT (cpu.cpp) and the GPU compilers (gpu_compile.cpp) share: a kernel's IR
// text parsed into a module, and the optimization pipeline for a target machine. Only runtime/'s
// LLVM users include this header (it brings LLVM's).
#pragma once

#include <memory>
#include <string>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

namespace tinyrw {

// `ir` as a module of `ctx`; a std::runtime_error "<who>: the kernel's LLVM IR does not parse: ..."
// with LLVM's diagnostic otherwise.
std::unique_ptr<llvm::Module> parse_kernel_ir(const std::string& ir, const std::string& name,
                                              llvm::LLVMContext& ctx, const std::string& who);

// LLVM's O3 pipeline with the target's own passes and cost model, and with `slp`, SLP vectorization
// (clang's O2 and up turn it on; a PassBuilder leaves it off): the CPU's packs the renderer's
// per-lane scalar ops into vector instructions; a GPU's threads are its lanes.
void optimize_module(llvm::Module& m, llvm::TargetMachine* tm, bool slp);

}  // namespace tinyrw

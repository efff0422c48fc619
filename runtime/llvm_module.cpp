#include "runtime/llvm_module.h"

#include <stdexcept>

#include <llvm/IRReader/IRReader.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

namespace tinyrw {

std::unique_ptr<llvm::Module> parse_kernel_ir(const std::string& ir, const std::string& name,
                                              llvm::LLVMContext& ctx, const std::string& who) {
  llvm::SMDiagnostic err;
  auto module = llvm::parseIR(llvm::MemoryBufferRef(ir, name), err, ctx);
  if (!module) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    err.print(name.c_str(), os);
    throw std::runtime_error(who + ": the kernel's LLVM IR does not parse: " + os.str());
  }
  return module;
}

void optimize_module(llvm::Module& m, llvm::TargetMachine* tm, bool slp) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.SLPVectorization = slp;
  llvm::PassBuilder pb(tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

}  // namespace tinyrw

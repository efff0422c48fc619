#include "runtime/cpu.h"

#include "runtime/llvm_module.h"
#include "runtime/thread_pool.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

namespace tinyrw {

namespace {

class Jit {
 public:
  static Jit& get() {
    static Jit* j = new Jit();  // lives for the process: compiled kernels stay callable
    return *j;
  }
  KernelFn compile(const std::string& ir) {
    {
      std::lock_guard lock(mu_);
      if (auto it = cache_.find(ir); it != cache_.end()) return it->second;
    }
    // Parsing, the optimizer and code generation run outside the lock, each compile with a
    // context and target machine of its own (a TargetMachine's subtarget cache is not
    // thread-safe), so that the kernels of one schedule, compiled asynchronously, compile on every
    // core; only linking the object into the JIT is serialized.
    const std::string name =
        "kernel_" + std::to_string(next_name_++);  // unique even after failures
    auto ctx = std::make_unique<llvm::LLVMContext>();
    std::string text = ir;
    text.replace(text.find("@kernel("), 8, "@" + name + "(");
    auto module = parse_kernel_ir(text, name, *ctx, "CPU");
    module->setDataLayout(jit_->getDataLayout());
    module->setTargetTriple(jit_->getTargetTriple().str());
    auto tm = host_.createTargetMachine();
    if (!tm) throw std::runtime_error("CPU: no target machine: " + llvm::toString(tm.takeError()));
    optimize_module(*module, tm->get(), /*slp=*/true);
    llvm::SmallVector<char, 0> object;
    {
      llvm::raw_svector_ostream os(object);
      llvm::legacy::PassManager codegen;
      if ((*tm)->addPassesToEmitFile(codegen, os, nullptr, llvm::CGFT_ObjectFile))
        throw std::runtime_error("CPU: the target machine cannot emit an object file");
      codegen.run(*module);
    }
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(ir); it != cache_.end()) return it->second;
    if (auto e = jit_->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(
            llvm::StringRef(object.data(), object.size()), name))) {
      throw std::runtime_error("CPU: cannot add the kernel: " + llvm::toString(std::move(e)));
    }
    auto sym = jit_->lookup(name);
    if (!sym)
      throw std::runtime_error("CPU: cannot find the kernel: " + llvm::toString(sym.takeError()));
    auto fn = reinterpret_cast<KernelFn>(sym->getValue());
    cache_.emplace(ir, fn);
    return fn;
  }

 private:
  Jit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // The host's CPU and features (AVX2, ...) for both code generation and the optimizer: without
    // a target machine the pass pipeline's cost model knows no vector registers and leaves the
    // renderer's per-lane scalar ops unvectorized.
    auto host = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!host)
      throw std::runtime_error("CPU: cannot detect the host: " + llvm::toString(host.takeError()));
    host->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    host_ = *host;
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*host)).create();
    if (!jit)
      throw std::runtime_error("CPU: cannot create the JIT: " + llvm::toString(jit.takeError()));
    jit_ = std::move(*jit);
    // libm (sinf, exp2f, ...) and the rest of the process resolve the kernels' calls.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        jit_->getDataLayout().getGlobalPrefix());
    if (!gen) throw std::runtime_error("CPU: " + llvm::toString(gen.takeError()));
    jit_->getMainJITDylib().addGenerator(std::move(*gen));
  }
  std::mutex mu_;
  llvm::orc::JITTargetMachineBuilder host_{llvm::Triple()};  // makes each compile's target machine
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::map<std::string, KernelFn> cache_;
  std::atomic<int> next_name_ = 0;
};

}  // namespace

KernelFn cpu_compile(const std::string& ir) { return Jit::get().compile(ir); }

std::shared_future<KernelFn> cpu_compile_async(std::string ir) {
  return std::async(std::launch::async, [ir = std::move(ir)] { return cpu_compile(ir); }).share();
}

int32_t cpu_launch(KernelFn fn, void** bufs, int64_t threads, int64_t width) {
  if (threads <= 1) return fn(bufs, 0);
  std::vector<int32_t> codes(static_cast<size_t>(threads), 0);
  parallel_for(threads, width > 0 ? width : threads, [&](int64_t t) {
    codes[static_cast<size_t>(t)] = fn(bufs, static_cast<int32_t>(t));
  });
  for (int32_t c : codes)
    if (c != 0) return c;
  return 0;
}

bool cpu_available() {
  try {
    Jit::get();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace tinyrw

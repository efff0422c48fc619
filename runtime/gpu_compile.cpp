#include "runtime/gpu_compile.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include <fmt/format.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/Transforms/IPO/Internalize.h>

#include "codegen/linearize.h"
#include "codegen/target.h"
#include "ir/env.h"
#include "ir/kernel_info.h"
#include "runtime/llvm_module.h"
#include "runtime/llvm_render.h"

namespace tinyrw {

namespace {

void init_gpu_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
    // AMDGPU's straight-line scalar passes (NaryReassociate among them) take minutes on the
    // long index sums a deep view chain gives (quadratic in their terms); the IR is optimized at
    // O3 before the backend runs
    auto& options = llvm::cl::getRegisteredOptions();
    if (auto it = options.find("amdgpu-scalar-ir-passes"); it != options.end())
      (void)it->second->addOccurrence(0, "amdgpu-scalar-ir-passes", "false");
  });
}

// A bitcode library's module; nothing when the file is not there.
std::unique_ptr<llvm::Module> read_bitcode(const std::string& path, llvm::LLVMContext& ctx,
                                           const char* who) {
  if (access(path.c_str(), R_OK) != 0) return nullptr;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) throw std::runtime_error(fmt::format("{}: cannot read {}", who, path));
  auto m = llvm::parseBitcodeFile((*buffer)->getMemBufferRef(), ctx);
  if (!m)
    throw std::runtime_error(fmt::format("{}: {} is no bitcode LLVM 15 reads: {}", who, path,
                                         llvm::toString(m.takeError())));
  return std::move(*m);
}

// CUDA's libdevice: the CUDA toolkit's (optional; $CUDA_PATH, /usr/local/cuda, Debian's
// nvidia-cuda-toolkit).
std::string libdevice_path() {
  std::vector<std::string> roots;
  if (const char* cuda = std::getenv("CUDA_PATH"); cuda && *cuda) roots.push_back(cuda);
  roots.insert(roots.end(), {"/usr/local/cuda", "/usr/lib/nvidia-cuda-toolkit"});
  for (const std::string& r : roots)
    for (const char* sub : {"/nvvm/libdevice/libdevice.10.bc", "/libdevice/libdevice.10.bc"})
      if (access((r + sub).c_str(), R_OK) == 0) return r + sub;
  return "";
}

// ROCm's device libraries (Debian's rocm-device-libs): ocml and the oclc settings it reads for an
// architecture ("gfx90a" -> oclc_isa_version_90a.bc; an architecture newer than the libraries
// know reads the newest of its generation's).
std::vector<std::string> ocml_paths(const std::string& arch) {
  const std::string dir = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode/";
  std::string isa = dir + "oclc_isa_version_" + arch.substr(3) + ".bc";
  if (access(isa.c_str(), R_OK) != 0)
    isa = dir + (arch.starts_with("gfx1") ? "oclc_isa_version_1030.bc" : "oclc_isa_version_90a.bc");
  const bool wave64 = !arch.starts_with("gfx1");
  return {dir + "ocml.bc",
          dir + "oclc_finite_only_off.bc",
          dir + "oclc_unsafe_math_off.bc",
          dir + "oclc_correctly_rounded_sqrt_on.bc",
          dir + "oclc_daz_opt_off.bc",
          dir + (wave64 ? "oclc_wavefrontsize64_on.bc" : "oclc_wavefrontsize64_off.bc"),
          isa};
}

// The math library functions a kernel calls (runtime/llvm_render.cpp: sin, pow), linked in from
// the device's library; everything else of the library is dropped. An error names the missing
// library and how to get it.
void link_math_library(llvm::Module& m, const std::string& triple, const std::string& arch,
                       const char* who) {
  const bool nv = triple.starts_with("nvptx");
  bool calls = false;
  for (const llvm::Function& f : m)
    calls = calls || (f.isDeclaration() && f.getName().startswith(nv ? "__nv_" : "__ocml_"));
  if (!calls) return;
  std::vector<std::string> paths;
  if (nv) {
    paths = {libdevice_path()};
    if (paths[0].empty())
      throw MissingGpuTool(
          "CUDA: the kernel calls libdevice (float64 sin, pow), which comes with the CUDA "
          "toolkit: none found ($CUDA_PATH, /usr/local/cuda)");
  } else {
    paths = ocml_paths(arch);
  }
  const std::string kernel = [&] {
    for (const llvm::Function& f : m)
      if (!f.isDeclaration()) return f.getName().str();
    return std::string();
  }();
  for (const std::string& path : paths) {
    std::unique_ptr<llvm::Module> lib = read_bitcode(path, m.getContext(), who);
    if (!lib)
      throw std::runtime_error(fmt::format(
          "{}: the kernel calls ocml (float64 sin, pow): {} is missing (Debian: apt-get install "
          "rocm-device-libs)",
          who, path));
    lib->setTargetTriple(m.getTargetTriple());
    lib->setDataLayout(m.getDataLayout());
    if (llvm::Linker::linkModules(m, std::move(lib), llvm::Linker::LinkOnlyNeeded))
      throw std::runtime_error(fmt::format("{}: cannot link {}", who, path));
  }
  llvm::internalizeModule(m, [&](const llvm::GlobalValue& g) { return g.getName() == kernel; });
}

// The kernel's IR compiled by `triple`'s backend for `cpu`: assembly text or an object file.
std::string emit(const std::string& ir, const std::string& triple, const std::string& cpu,
                 const std::string& features, llvm::CodeGenFileType kind, const char* who,
                 llvm::CodeGenOpt::Level level) {
  init_gpu_targets();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    throw std::runtime_error(fmt::format("{}: no LLVM target {}: {}", who, triple, error));
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, cpu, features, llvm::TargetOptions(), llvm::Reloc::PIC_, llvm::None, level));
  if (!tm) throw std::runtime_error(fmt::format("{}: no target machine for {}", who, cpu));
  // (LLVM only warns about a processor it does not know, and emits code for none in particular)
  if (!tm->getMCSubtargetInfo()->isCPUStringValid(cpu))
    throw std::runtime_error(fmt::format(
        "{}: LLVM 15 does not know the processor {} (a device newer than it)", who, cpu));
  llvm::LLVMContext ctx;
  auto module = parse_kernel_ir(ir, "kernel", ctx, who);
  link_math_library(*module, triple, cpu, who);
  module->setTargetTriple(triple);
  module->setDataLayout(tm->createDataLayout());
  optimize_module(*module, tm.get(), /*slp=*/false);
  llvm::SmallString<0> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, kind))
    throw std::runtime_error(fmt::format("{}: LLVM cannot emit code for {}", who, cpu));
  pm.run(*module);
  return std::string(out.begin(), out.end());
}

// A fresh directory for a compile's files, removed when it goes out of scope.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string t = (std::filesystem::temp_directory_path() / "tinyrw-gpu-XXXXXX").string();
    if (!mkdtemp(t.data()))
      throw std::runtime_error("cannot make a scratch directory for a GPU compile");
    path = t;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + p.string());
}
std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs argv (no shell), its output into `log`: the exit status, or -1 when it could not run.
int run_tool(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::FILE* out = std::freopen(log.c_str(), "w", stdout);
    if (out) (void)dup2(fileno(stdout), STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The first of `candidates` that is an executable file, or "".
std::string find_tool(std::initializer_list<const char*> candidates) {
  for (const char* c : candidates)
    if (access(c, X_OK) == 0) return c;
  return "";
}
std::string ld_lld() {
  return find_tool({"/usr/lib/llvm-15/bin/ld.lld", "/usr/bin/ld.lld-15", "/usr/bin/ld.lld"});
}
std::string ptxas() {
  if (const char* cuda = std::getenv("CUDA_PATH"); cuda && *cuda) {
    const std::string p = std::string(cuda) + "/bin/ptxas";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return find_tool({"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"});
}

}  // namespace

std::string compile_ptx(const std::string& ir, const std::string& arch) {
  // The IR is optimized at O3 first; the backend's own scalar passes are left out: the driver's
  // PTX compiler optimizes again, and NVPTX's NaryReassociate takes minutes on the long index
  // sums a deep view chain gives (quadratic in their terms).
  return emit(ir, "nvptx64-nvidia-cuda", arch, "+ptx75", llvm::CGFT_AssemblyFile, "CUDA",
              llvm::CodeGenOpt::None);
}

std::string compile_amdgpu(const std::string& ir, const std::string& arch) {
  const std::string object = emit(ir, "amdgcn-amd-amdhsa", arch, "", llvm::CGFT_ObjectFile, "HIP",
                                  llvm::CodeGenOpt::Aggressive);
  const std::string lld = ld_lld();
  if (lld.empty())
    throw std::runtime_error(
        "HIP: no ld.lld to link the code object (Debian: apt-get install lld-15)");
  const ScratchDir dir;
  write_file(dir.path / "kernel.o", object);
  const int rc = run_tool({lld, "-shared", "-o", (dir.path / "kernel.hsaco").string(),
                           (dir.path / "kernel.o").string()},
                          dir.path / "ld.log");
  if (rc != 0)
    throw std::runtime_error(
        fmt::format("HIP: ld.lld failed (status {}): {}", rc, read_file(dir.path / "ld.log")));
  return read_file(dir.path / "kernel.hsaco");
}

bool ptxas_available() { return !ptxas().empty(); }

std::optional<std::string> ptxas_error(const std::string& ptx, const std::string& arch) {
  const std::string tool = ptxas();
  if (tool.empty()) return std::nullopt;
  const ScratchDir dir;
  write_file(dir.path / "kernel.ptx", ptx);
  const int rc = run_tool({tool, "-arch=" + arch, "-o", (dir.path / "kernel.cubin").string(),
                           (dir.path / "kernel.ptx").string()},
                          dir.path / "ptxas.log");
  if (rc == 0) return std::nullopt;
  return fmt::format("ptxas failed (status {}): {}", rc, read_file(dir.path / "ptxas.log"));
}

bool code_object_exports(const std::string& elf, const std::string& name) {
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(elf), "code object", false);
  auto object = llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!object) {
    llvm::consumeError(object.takeError());
    return false;
  }
  bool symbol = false, descriptor = false;
  for (const llvm::object::SymbolRef& s : (*object)->symbols()) {
    auto n = s.getName();
    if (!n) {
      llvm::consumeError(n.takeError());
      continue;
    }
    symbol = symbol || *n == name;
    descriptor = descriptor || *n == name + ".kd";
  }
  return symbol && descriptor;
}

bool gpu_compile_check_enabled() { return env_int("GPU_COMPILE_CHECK", 0) != 0; }

void check_gpu_compiles(const UOp& bound, const std::string& name) {
  // the GPU's own opts (those the kernel names may be a CPU's, THREAD)
  KernelInfo info = KernelInfo::of(bound);
  info.opts_to_apply.reset();
  const UOp kernel = bound.with_arg(info.to_arg());
  // each kernel once (INTERP and CPU compile the same one)
  static std::mutex mu;
  static std::unordered_set<UOp> checked;
  {
    const std::lock_guard lock(mu);
    if (!checked.insert(kernel).second) return;
  }
  for (const auto& [device, target] :
       {std::pair{"CUDA", LlvmTarget::Nvptx}, std::pair{"HIP", LlvmTarget::Amdgpu}}) {
    const UOp program = linearize_kernel(kernel, Target::of(device), {}, true);
    const RenderedKernel k = render_llvm(program, target, name);
    try {
      if (target == LlvmTarget::Nvptx) {
        const std::string ptx = compile_ptx(k.ir);
        if (const auto error = ptxas_error(ptx)) throw std::runtime_error(*error);
      } else if (!code_object_exports(compile_amdgpu(k.ir), k.name)) {
        throw std::runtime_error("the code object does not define the kernel " + k.name);
      }
    } catch (const MissingGpuTool& e) {
      std::fprintf(stderr, "GPU_COMPILE_CHECK: kernel %s not compiled for %s: %s\n", name.c_str(),
                   device, e.what());
    } catch (const std::exception& e) {
      throw std::runtime_error(
          fmt::format("GPU_COMPILE_CHECK: kernel {} does not compile for {}: {}\n{}", name, device,
                      e.what(), k.ir));
    }
  }
}

}  // namespace tinyrw

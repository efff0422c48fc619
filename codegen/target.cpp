#include "codegen/target.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "ir/env.h"

namespace tinyrw {

bool Target::renders(Op op, DType dtype) const {
  return std::none_of(decomposed.begin(), decomposed.end(), [&](const Decomposed& d) {
    return d.op == op && (d.dtypes.empty() || std::ranges::find(d.dtypes, dtype) != d.dtypes.end());
  });
}

int64_t Target::thread_limit() const { return has_threads ? cpu_threads() : 1; }

namespace {
// The host's SIMD register width in bytes, as LLVM's host CPU detection will use it.
int64_t host_vector_bytes() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 64;
  if (__builtin_cpu_supports("avx")) return 32;
  return 16;
}

// The cores this process may run on (its affinity), capped by a cgroup's CPU quota: a container
// limited to 2 CPUs on a large host gets 2 threads, not one per host core. Read once: every
// kernel launch asks (the compile cache's key).
int64_t machine_threads() {
  static const int64_t threads = [] {
    int64_t n = std::max<int64_t>(1, std::thread::hardware_concurrency());
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) n = std::max(1, CPU_COUNT(&set));
    if (std::ifstream quota("/sys/fs/cgroup/cpu.max"); quota) {
      std::string max;
      int64_t period = 0;
      if (quota >> max >> period && max != "max" && period > 0)
        n = std::min(n, std::max<int64_t>(1, std::stoll(max) / period));
    }
    return n;
  }();
  return threads;
}
// A GPU target whose kernels INTERP runs: its opts, limits and decompositions, under INTERP's name.
Target as_interp(const Target& gpu) {
  Target t = gpu;
  t.device = "INTERP as " + gpu.device;
  return t;
}
}  // namespace

int64_t cpu_threads() {
  if (const int64_t n = env_int("CPU_THREADS", 0); n != 0) {
    if (n < 0 || n > 1024)
      throw std::invalid_argument(
          fmt::format("CPU_THREADS={}: expected a number of threads from 1 to 1024", n));
    return n;
  }
  return machine_threads();
}

const Target& Target::of(const std::string& device) {
  // INTERP runs a threaded kernel's threads one after another: it mirrors the CPU's kernels
  static const Target interp{
      .device = "INTERP", .decomposed = {}, .has_threads = true, .unaligned_vectors = true};
  static const Target cpu{
      .device = "CPU",
      .decomposed = {{Op::FloorDiv, {}},
                     {Op::FloorMod, {}},
                     {Op::Exp2, {}},
                     {Op::Log2, {}},
                     {Op::ThreeFry, {}}},
      .has_threads = true,
      .vector_bytes = host_vector_bytes(),
      .unaligned_vectors = true,
      .vector_alu = true,
  };
  // tinygrad's CUDARenderer and HIPRenderer limits. Both render through LLVM's NVPTX and AMDGPU
  // backends (runtime/llvm_render.h), which lower no floor division or modulo, no ThreeFry, and
  // no exp2, log2 or sin (a call into a math library they do not link): those are rules, as on
  // the CPU; a float64 sin has no polynomial right beyond 2^32 and stays the renderer's.
  static const std::vector<Target::Decomposed> gpu_decomposed = {
      {Op::FloorDiv, {}}, {Op::FloorMod, {}},
      {Op::Exp2, {}},     {Op::Log2, {}},
      {Op::ThreeFry, {}}, {Op::Sin, {dtypes::float16, dtypes::bfloat16, dtypes::float32}}};
  static const Target cuda{.device = "CUDA",
                           .decomposed = gpu_decomposed,
                           .has_local = true,
                           .has_shared = true,
                           .shared_max = 49152,
                           .global_max = {2147483647, 65535, 65535},
                           .local_max = {1024, 1024, 64}};
  static const Target hip{.device = "HIP",
                          .decomposed = gpu_decomposed,
                          .has_local = true,
                          .has_shared = true,
                          .shared_max = 65536,
                          .global_max = {2147483647, 65535, 65535},
                          .local_max = {1024, 1024, 1024},
                          .global_prod_max = {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}};
  static const Target interp_cuda = as_interp(cuda), interp_hip = as_interp(hip);
  if (device == "INTERP") {
    const std::string as = interp_target();
    return as == "CUDA" ? interp_cuda : as == "HIP" ? interp_hip : interp;
  }
  if (device == "CPU") return cpu;
  if (device == "CUDA") return cuda;
  if (device == "HIP") return hip;
  throw std::invalid_argument(fmt::format("no codegen target for device '{}'", device));
}

std::string interp_target() {
  const char* v = std::getenv("INTERP_TARGET");
  if (!v || !*v || std::string_view(v) == "INTERP") return "";
  std::string upper(v);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper != "CUDA" && upper != "HIP")
    throw std::invalid_argument(fmt::format(
        "INTERP_TARGET={}: INTERP runs the kernels of CUDA or HIP (or, unset, the CPU's)", v));
  return upper;
}

}  // namespace tinyrw

#include "codegen/target.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace tinyrw {

bool Target::renders(Op op, DType dtype) const {
  return std::none_of(decomposed.begin(), decomposed.end(), [&](const Decomposed& d) {
    return d.op == op && (d.dtypes.empty() || std::ranges::find(d.dtypes, dtype) != d.dtypes.end());
  });
}

int64_t Target::thread_limit() const { return has_threads ? cpu_threads() : 1; }

int64_t cpu_threads() {
  if (const char* v = std::getenv("CPU_THREADS"); v && *v) {
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    if (*end != '\0' || n <= 0 || n > 1024)
      throw std::invalid_argument(
          fmt::format("CPU_THREADS={}: expected a number of threads from 1 to 1024", v));
    return n;
  }
  return std::max<int64_t>(1, std::thread::hardware_concurrency());
}

const Target& Target::of(const std::string& device) {
  // INTERP runs a threaded kernel's threads one after another: it mirrors the CPU's kernels
  static const Target interp{.device = "INTERP", .decomposed = {}, .has_threads = true};
  static const Target cpu{
      .device = "CPU",
      .decomposed = {{Op::FloorDiv, {}}, {Op::FloorMod, {}}, {Op::Exp2, {}}, {Op::Log2, {}}},
      .has_threads = true,
  };
  static const Target cuda{.device = "CUDA",
                           .decomposed = {},
                           .has_local = true,
                           .has_shared = true,
                           .local_max = {1024, 1024, 64},
                           .shared_max = 49152};
  static const Target hip{.device = "HIP",
                          .decomposed = {},
                          .has_local = true,
                          .has_shared = true,
                          .local_max = {1024, 1024, 1024},
                          .shared_max = 65536};
  if (device == "INTERP") return interp;
  if (device == "CPU") return cpu;
  if (device == "CUDA") return cuda;
  if (device == "HIP") return hip;
  throw std::invalid_argument(fmt::format("no codegen target for device '{}'", device));
}

}  // namespace tinyrw

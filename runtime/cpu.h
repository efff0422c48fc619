// The CPU device: LLVM IR compiled by LLVM's ORC JIT (no external compiler at run time).
#pragma once

#include <cstdint>
#include <future>
#include <string>

namespace tinyrw {

// A compiled kernel: bufs[0] is unused, bufs[1..] the buffers in the renderer's order; core_id the
// thread this call runs (runtime/llvm_render.h). It returns 0, or an error code (see
// kernel_error_op in runtime/llvm_render.h).
using KernelFn = int32_t (*)(void** bufs, int32_t core_id);

// Calls `fn` once per thread 0..threads-1 on the thread pool (runtime/thread_pool.h), at most
// `width` at once (0: all; fewer while other devices' launches share the cores), returning the
// first nonzero code any call returned (0 when none did).
int32_t cpu_launch(KernelFn fn, void** bufs, int64_t threads, int64_t width = 0);

// Compiles (and caches by IR text) a module whose function is named `kernel`. Throws
// std::runtime_error with LLVM's message when the IR does not compile.
KernelFn cpu_compile(const std::string& ir);
// cpu_compile on a thread of its own: LLVM compiles one kernel while the caller lowers the next
// (the rules and the IR are single-threaded; LLVM's work is neither's). get() gives the function
// or throws what cpu_compile threw.
std::shared_future<KernelFn> cpu_compile_async(std::string ir);
bool cpu_available();

}  // namespace tinyrw

// The CPU device's threads: a kernel split by a THREAD opt (codegen/opt.h) runs once per thread,
// its calls spread over a pool of worker threads started once and kept for the process.
#pragma once

#include <cstdint>
#include <functional>

namespace tinyrw {

// Runs task(0) ... task(n-1), at most `width` at once, on the pool and the calling thread, and
// returns when all have finished. An exception a task throws is rethrown here (the first one)
// after the others finished. Calls from several threads at once are safe; a task must not call
// parallel_for itself.
void parallel_for(int64_t n, int64_t width, const std::function<void(int64_t)>& task);

}  // namespace tinyrw

// The INTERP device: executes LINEAR programs (codegen/linearize.h) instruction by instruction
// with the exact semantics of ir/alu.h — the reference the compiled devices are checked against.
#pragma once

#include <map>
#include <memory>

#include "ir/uop.h"
#include "runtime/storage.h"

namespace tinyrw {

// `buffers` maps BUFFER slots to host storage; accumulators (REG buffers) live in the run. A
// threaded program (SPECIAL core_id) runs once per thread, one after another.
void interp_run(const UOp& program, const std::map<int64_t, std::shared_ptr<Storage>>& buffers);

}  // namespace tinyrw

// The INTERP device: executes LINEAR programs (codegen/linearize.h) instruction by instruction
// with the exact semantics of ir/alu.h — the reference the compiled devices are checked against.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "ir/uop.h"
#include "runtime/storage.h"

namespace tinyrw {

// `buffers` maps BUFFER slots to host storage; accumulators (REG buffers) live in the run;
// `variables` gives each DEFINE_VAR's value by name. A threaded program (SPECIAL core_id) runs once
// per thread, one after another; a GPU-shaped one (SPECIAL gidx0..2, lidx0..2) once per thread of
// each workgroup, the workgroups one after another, the threads of one in lockstep from barrier to
// barrier, sharing its LOCAL buffers.
void interp_run(const UOp& program, const std::map<int64_t, std::shared_ptr<Storage>>& buffers,
                const std::map<std::string, int64_t>& variables = {});

}  // namespace tinyrw

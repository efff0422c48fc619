// CALL nodes: a body over PARAM placeholders applied to arguments. Two kinds share the op:
// - a function CALL (Tensor function()): the body is SINK(outputs...) of tensor values; output i
//   is RETURNED(call, i) and the call is inlined (or precompiled) when realized;
// - a kernel CALL (Tensor custom_kernel(), or an opaque PROGRAM/COPY body): the body writes some
//   arguments in place, and what it reads and writes is derived by call_access().
#pragma once

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/uop.h"

namespace tinyrw {

struct CallInfo {
  std::string name;
  bool kernel = false;  // a kernel CALL (in-place effects) rather than a function CALL
  bool precompile = false;
  bool precompile_backward = false;
  int64_t grad_fn = -1;  // a registered custom gradient (tensor/function.h), -1 for none
  int64_t id = 0;        // a kernel CALL's identity as an event (like an assignment's number)
  Arg to_arg() const;
  static CallInfo of(const UOp& call);  // the CALL's arg, checked
};

// The BUFFER (or PARAM) a view or assignment chain addresses, through movement ops and AFTERs:
// two views with the same root share storage.
UOp storage_root(UOp u);

// PARAM `slot` standing for a value like `like` (dtype, shape, device).
UOp param_like(const UOp& like, size_t slot);
// The body with each PARAM slot k replaced by args[k]; the bodies of nested CALLs keep their own
// parameters (only their arguments are rewritten).
UOp bind_params(const UOp& body, std::span<const UOp> args);
// `map` applied to the graph, whole subtrees at a time, without entering the bodies of CALLs
// (they have their own parameters).
UOp replace_outside_calls(const UOp& root, const std::unordered_map<UOp, UOp>& map);
// The CALL's body and arguments, the body with PARAMs bound: output i of a function CALL.
UOp inline_output(const UOp& call, size_t i);

// The gradients of a CALL's outputs travel to the CALL as one bundle, SINK(g0, g1, ...) with a
// NOOP where an output has none, so that the CALL is differentiated once for all its outputs.
UOp call_grad_bundle(size_t outputs, size_t i, const UOp& g);  // g for output i alone
bool is_call_grad_bundle(const UOp& u);
UOp add_call_grad_bundles(const UOp& a, const UOp& b);  // output by output
// The number of outputs of a CALL: its SINK body's sources (a function) or its arguments (a
// kernel, whose outputs are its arguments after it ran).
size_t call_outputs(const UOp& call);

// What a kernel CALL does to its arguments, as argument slots (ascending): the slots it reads and
// the slots it writes (a read-modify-write is in both). Derived from the LOAD/STORE memory operands
// of the body (SINK, LINEAR, nested CALLs through their arguments, COPY into slot 0) or a
// PROGRAM's recorded ins/outs; an opaque body raises "cannot compute accesses".
struct CallAccess {
  std::vector<size_t> reads, writes;
};
CallAccess call_access(const UOp& call);
// ProgramInfo(ins, outs) for a PROGRAM compiled from `sink`, as call_access derives them.
Arg program_info_from_sink(const UOp& sink, size_t nargs);

}  // namespace tinyrw

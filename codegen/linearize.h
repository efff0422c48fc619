// Late codegen: a kernel AST (or custom kernel) bound to buffers becomes a LINEAR program, the one
// program form every device runs (INTERP executes it, CPU renders it to LLVM IR). The stages,
// in tinygrad's order (codegen/__init__.py full_rewrite_to_sink), are rule sets:
//   rules/expander.rw     simplify_ranges (loop merging); then the opts (codegen/opt.h)
//   rules/gpudims.rw      add_gpudims: a THREAD range becomes the launch's SPECIAL core_id
//   rules/linearize.rw    order_effects (a SINK's and GROUP's effects in order)
//   rules/devectorizer.rw add_loads
//   rules/expander.rw     expander: UPCAST/UNROLL ranges become vector lanes
//   rules/reduce.rw       reduce_to_acc, merge_reduce_ends: REDUCEs become register accumulators
//   rules/devectorizer.rw expand_broadcast, devectorize (one scalar op per lane, memory
//                         coalescing into vector LOADs/STOREs of SHRINK(buffer, first, n))
//   rules/linearize.rw    move_gates_from_index
//   rules/decompositions.rw lower_index_dtype (index math in int32, or int64 where it needs it)
//   rules/transcendental.rw transcendental (exp2, log2, sin as polynomials where the target's
//                         renderer lacks them: codegen/target.h)
//   rules/decompositions.rw late_decompositions (what else the renderer lacks; powers of two as
//                         shifts and masks, division by constants as multiply and shift)
//   rules/devectorizer.rw vectorize_alu (the CPU: a STACK of one float32 op per lane becomes
//                         the op on vectors)
//   rules/linearize.rw    split_ends, add_control_flow
// then `linearize` orders the graph (a priority toposort, tinygrad's linearizer). The program:
//   BUFFER                           a buffer (a negative slot: a register of the run)
//   CONST, ALU ops, CAST, BITCAST    compute a value from earlier instructions
//   SPECIAL(bound) "core_id"         the thread this run of the kernel is (0..bound-1): the
//                                    kernel runs once per thread
//   RANGE(bound, after?)             opens a loop; its value is the loop index (`after`: the
//                                    instruction the loop must follow, control flow only)
//   END(effect, range)               closes the loop of that RANGE
//   INDEX(buffer, i)                 the address of element i
//   SHRINK(buffer, (i,), (n,))       the address of elements i..i+n-1 (a vector access)
//   LOAD(address[, alt, gate])       reads it (where gate holds; alt elsewhere); a vector for a
//                                    SHRINK, whose lane k is INDEX(load, k)
//   STACK(lanes...)                  a vector value
//   ADD, SUB, MUL, MULACC, MAX of vectors  a float32 vector value (CPU: vectorize_alu)
//   STORE(address, value)            writes it
//   AFTER(buffer, deps...)           the buffer once deps ran (ordering only)
//   GROUP, SINK                      bundles of effects (ordering only)
// Each instruction runs once per iteration of the loops around it.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "ir/uop.h"

namespace tinyrw {

// A custom kernel or a kernel AST: SINK of effects, each a STORE, END(effect, ranges...) (the
// effect inside those loops) or GROUP(effects...), over PARAMs; `buffers[k]` is the BUFFER that
// PARAM slot k stands for. PARAM[i, j, ...] addresses elements row-major in the PARAM's shape (a
// single index is flat); LOAD(x) is x's value; a bare PARAM of one element is that element. A
// value may hold REDUCE(v, ranges...) (its own loops). A read at a gated index,
// PARAM[where(valid, i, Invalid)], is element i where valid holds and 0 elsewhere.
// The kernel with its PARAM accesses bound to buffers: INDEX(BUFFER, flat index), each access
// checked to stay inside its buffer (an index over an empty range is never computed; a gated
// read is checked only where its gate holds: the expressions that clauses x < c, c < x,
// !(x < c), !(c < x) of the gate bound are narrowed); a gated read keeps its gate on the flat
// index, INDEX(BUFFER, where(valid, i, Invalid)). Within one of the SINK's effects, a buffer the
// effect writes may be read only at the elements it writes (the order of other reads is not
// defined: it is refused); a malformed effect or a RANGE closed by two ENDs is refused too.
UOp bind_kernel(const UOp& sink, const std::vector<UOp>& buffers);
// Where a BUFFER's memory is: GLOBAL (a kernel argument; a ParamArg that names no addrspace),
// LOCAL (a workgroup's shared memory) or REG (a register of the run: rules/reduce.rw's
// accumulators).
AddrSpace buffer_addrspace(const UOp& buffer);
inline bool is_register(const UOp& buffer) { return buffer_addrspace(buffer) == AddrSpace::Reg; }
// The BUFFERs a kernel AST's PARAMs stand for, by slot (slot k at position k): each of its
// PARAM's dtype and element count, for compiling a kernel before any storage exists.
std::vector<UOp> param_buffers(const UOp& sink);
// A bound kernel through the late stages, as a LINEAR program: its loops merged where they index
// as one (rules/expander.rw simplify_ranges), its KernelInfo's opts_to_apply applied (codegen/
// opt.h; with none, hand_coded_opts when `default_opts_if_none`), then the rule sets above, whose
// decompositions leave the ops `target`'s renderer computes.
// `trace` (may be empty) sees each stage's name and result (DEBUG prints them; VIZ records every
// rewrite itself).
using StageTrace = std::function<void(const std::string& stage, const UOp& result)>;
// `optimized_name` (may be null) receives the kernel's name after its opts (tinygrad names a
// kernel by its optimized ranges: codegen/kernel_name.h).
UOp linearize_kernel(const UOp& bound, const Target& target, const StageTrace& trace = {},
                     bool default_opts_if_none = false, std::string* optimized_name = nullptr);
// The order of a lowered kernel's instructions (tinygrad's linearize): sources before users, and
// among the orders that allows, the one closest to placing instructions that run fewer times
// first (by the product of the sizes of their loops), then definitions, loads, other values,
// stores, loop opens late and loop ends early.
std::vector<UOp> linearize(const UOp& sink);
// A LINEAR program one instruction a line, indented by loop depth (DEBUG); any other graph as its
// nodes in toposort order.
std::string render_program(const UOp& program);
std::string render_instructions(std::span<const UOp> instructions);

}  // namespace tinyrw

// The linearizer: a kernel AST (or custom kernel) bound to buffers becomes a LINEAR program, an
// ordered list of instructions:
//   RANGE(bound)                      opens a loop; its value is the loop index
//   END(range)                        closes the loop of that RANGE
//   CONST, ALU ops, CAST, BITCAST     compute a value from earlier instructions
//   INDEX(buffer, i)                  loads element i of a buffer
//   STORE(INDEX(buffer, i), v)        stores v
// A reduction becomes an accumulator first (rules/reduce.rw's reduce_to_acc: a one-element
// REG buffer set to the identity, updated inside the loops of its ranges, and loaded after them;
// an AFTER orders its effects before the value that reads the buffer). An instruction may appear
// more than once:
// every execution recomputes it, and later instructions see its latest value.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

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
// read is checked only where its gate holds: the expressions that
// clauses x < c, c < x, !(x < c), !(c < x) of the gate bound are narrowed); a gated read becomes
// where(valid, INDEX(BUFFER, i), 0), whose index the devices clamp where the gate does not hold.
UOp bind_kernel(const UOp& sink, const std::vector<UOp>& buffers);
// Walks a kernel's effects in order: `store` for each STORE, `open` and `close` around the
// effect of each END (whose ranges are its sources after the first); GROUPs and SINKs are
// flattened, anything else is refused as not an effect.
struct EffectVisitor {
  std::function<void(const UOp& store)> store;
  std::function<void(const UOp&end)> open, close;
};
void walk_effects(const UOp& sink, const EffectVisitor& visit);
// The op of a REDUCE over ranges: its arg is the op, or (op, 0) as in a kernel AST.
Op reduce_op(const UOp& reduce);
// A bound kernel as a LINEAR program.
UOp linearize_kernel(const UOp& bound);

}  // namespace tinyrw

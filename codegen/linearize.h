// The linearizer: a lowered kernel (the value of one output element over the output ranges, with
// loads, ALU ops and reductions) becomes a LINEAR program, an ordered list of instructions:
//   RANGE(bound)                      opens a loop; its value is the loop index
//   END(range)                        closes the loop of that RANGE
//   CONST, ALU ops, CAST, BITCAST     compute a value from earlier instructions
//   INDEX(buffer, i)                  loads element i of a buffer
//   STORE(INDEX(buffer, i), v)        stores v
// A reduction becomes an accumulator (a one-element REG buffer) set to the identity, updated
// inside the loops of its ranges, and loaded after them. An instruction may appear more than once:
// every execution recomputes it, and later instructions see its latest value.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ir/uop.h"

namespace tinyrw {

// `out` is the output buffer (a BUFFER UOp) of `shape`, `ranges` the output RANGEs. The value
// goes to element `dest_index` (an index expression over the ranges) when given, else to the
// row-major position of the ranges.
UOp linearize(const UOp& value, const std::vector<UOp>& ranges, const Dims& shape, const UOp& out,
              const UOp& dest_index = UOp());

// A custom kernel: SINK of effects, each a STORE, END(effect, ranges...) (the effect inside those
// loops) or GROUP(effects...), over PARAMs; `buffers[k]` is the BUFFER that PARAM slot k stands
// for. PARAM[i, j, ...] addresses elements row-major in the PARAM's shape; LOAD(x) is x's value;
// a bare PARAM of one element is that element.
// The kernel with its PARAM accesses bound to buffers: INDEX(BUFFER, flat index), each access
// checked to stay inside its buffer.
UOp bind_kernel(const UOp& sink, const std::vector<UOp>& buffers);
// Walks a kernel's effects in order: `store` for each STORE, `open` and `close` around the
// effect of each END (whose ranges are its sources after the first); GROUPs and SINKs are
// flattened, anything else is refused as not an effect.
struct EffectVisitor {
  std::function<void(const UOp& store)> store;
  std::function<void(const UOp&end)> open, close;
};
void walk_effects(const UOp& sink, const EffectVisitor& visit);
// A bound kernel as a LINEAR program.
UOp linearize_kernel(const UOp& bound);

}  // namespace tinyrw

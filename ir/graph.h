// Graph walks over UOps.
#pragma once

#include <functional>
#include <vector>

#include "ir/uop.h"

namespace tinyrw {

// Every node reachable from root, sources before users, in depth-first source order. `enter`
// (optional) decides whether to descend into a node's sources; enter_calls=false skips the body
// (source 0) of CALLs. Iterative: works on graphs of any depth.
std::vector<UOp> toposort(const UOp& root, const std::function<bool(const UOp&)>& enter = nullptr,
                          bool enter_calls = true);

// Whether evaluating root may raise or have no value: a division or modulo whose divisor's range
// holds 0, a shift whose count's range leaves [0, 127), the index constant Invalid (an analysis of
// ranges, beside UOp::may_wrap). Such a value must stay under the condition that guards it; where
// it is false, root is defined (rwc prove assumes so).
bool may_raise(const UOp& root);

// The RANGEs root depends on that no END or REDUCE at or under root closes (tinygrad's UOp.ranges:
// a kernel's STORE may use only ranges an END around it closes), in order of first use. Iterative;
// an AFTER (a buffer ordered after effects) has none.
std::vector<UOp> open_ranges(const UOp& root);

}  // namespace tinyrw

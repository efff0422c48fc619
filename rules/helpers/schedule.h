// The facts the realize-map rules (rules/rangeify.rw) read: analyses of one realize() that are not
// rewrites, computed by tensor/realize.cpp and read by the helpers of rules/helpers/schedule.cpp.
#pragma once

#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "ir/uop.h"

namespace tinyrw::rw {

struct ScheduleContext {
  std::unordered_set<UOp> roots;    // the tensors being realized
  std::unordered_set<UOp> pending;  // assignments (STORE) and kernel CALLs not yet run
  // the values of pending assignments that read a buffer another pending assignment writes (or
  // their own target other than element by element)
  std::unordered_set<UOp> hazards;
  std::unordered_set<UOp> pinned;    // views an assignment writes through
  std::unordered_set<UOp> executed;  // assignments and kernel CALLs of the graph that already ran
  // the fused depth of each node fused so far: the longest chain of elementwise and movement ops
  // ending in it inside its kernel (a realized node starts no chain)
  std::unordered_map<UOp, int> depth;
  int max_fused_depth = std::numeric_limits<int>::max();  // realize() sets kMaxFusedDepth

  // u's fused depth from its sources' (1 for an op over none that is fused; 0 for an op that does
  // not fuse into a chain: not elementwise, not movement)
  int fused_depth(const UOp& u) const;
  // u is fused into the kernels that read it: its depth is what their chains continue from
  void fuse(const UOp& u);
  // u a view (movement ops, fused so far) of a broadcast: the source of the first EXPAND on the
  // way up, when that source is fused too (the last place before the broadcast to cut); else null
  UOp broadcast_source(const UOp& u) const;
};

}  // namespace tinyrw::rw

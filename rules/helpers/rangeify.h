// The state of the rangeify pipeline (schedule/rangeify.cpp) that rules/rangeify.rw and
// rules/indexing.rw read: tinygrad's IndexingContext.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rules/helpers/schedule.h"

namespace tinyrw::rw {

// The whole-graph state of the rangeify pipeline (tinygrad's IndexingContext). It is a
// ScheduleContext, whose facts (is_root, pending, hazards, ...) the realize-map rules read: the
// rules get it as a ScheduleContext pointer.
struct IndexingContext : ScheduleContext {
  // the nodes that get a buffer of their own; the axes realized are decided by range propagation
  // (nullopt until then: tinygrad's None)
  std::unordered_map<UOp, std::optional<std::vector<int>>> realize_map;
  int next_range = 0;  // RANGE ids, unique in the graph until kernels are split
  // each node's input ranges (what its sources are indexed by) and output ranges
  std::unordered_map<UOp, std::pair<std::vector<UOp>, std::vector<UOp>>> range_map;
  // what the realize map realized for good (a custom kernel's sources, values with a hazard, the
  // depth limit's cuts): their STAGEs are never removed (tinygrad's non_removable)
  std::unordered_set<UOp> non_removable;
  // the nodes apply rangeify STAGEd, by tag (a STAGE's arg names its node, as tinygrad's tag: for
  // VIZ and the tests that ask which nodes the cost model kept)
  std::vector<UOp> staged;
  std::unordered_map<UOp, int64_t> stage_tags;
  // add buffers: each STAGE's BUFFER (slots -1, -2, ...: no storage until realize gives it one),
  // on this device
  std::unordered_map<UOp, UOp> stage_buffers;
  std::string device = "CPU";
};

}  // namespace tinyrw::rw

// State of rangeify that rules/rangeify.rw reads: the old per-kernel lowering's RangeifyContext
// (new_ranges()), and the new pipeline's IndexingContext (schedule/rangeify.cpp).
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rules/helpers/schedule.h"

namespace tinyrw::rw {

struct RangeifyContext {
  int next_axis = 0;  // RANGE axis ids are unique within a kernel
};

// The whole-graph state of the rangeify pipeline (tinygrad's IndexingContext). It is a
// ScheduleContext so that the realize-map rules read the same facts (is_root, pending) as the
// kernel-boundary rules: the rules get it as a ScheduleContext pointer.
struct IndexingContext : ScheduleContext {
  // the nodes that get a buffer of their own; the axes realized are decided by range propagation
  // (nullopt until then: tinygrad's None)
  std::unordered_map<UOp, std::optional<std::vector<int>>> realize_map;
  int next_range = 0;  // RANGE ids, unique in the graph until kernels are split
  // each node's input ranges (what its sources are indexed by) and output ranges
  std::unordered_map<UOp, std::pair<std::vector<UOp>, std::vector<UOp>>> range_map;
  // what the realize map realized for good (a custom kernel's sources): their STAGEs are never
  // removed (tinygrad's non_removable)
  std::unordered_set<UOp> non_removable;
  // the nodes apply rangeify STAGEd, by tag (a STAGE's arg names its node: tinygrad's tag)
  std::vector<UOp> staged;
  std::unordered_map<UOp, int64_t> stage_tags;
  // add buffers: each STAGE's BUFFER (slots -1, -2, ...: no storage until realize gives it one),
  // on this device
  std::unordered_map<UOp, UOp> stage_buffers;
  std::string device = "CPU";
};

}  // namespace tinyrw::rw

// The rangeify pipeline (tinygrad's get_kernel_graph): a tensor graph to a graph of kernels, stage
// by stage, each a named rewrite that VIZ shows: "earliest rewrites", "realize map", range
// propagation (run_rangeify), "apply rangeify", "cleanups", "add buffers", split kernels.
// realize() (tensor/realize.cpp) runs the kernel graph's CALLs, ordered by their dependencies and
// the assignments' write-after-read edges.
#pragma once

#include <limits>
#include <vector>

#include "dsl/ruleset.h"
#include "ir/uop.h"
#include "rules/helpers/rangeify.h"

namespace tinyrw {

// The graph after the stages run so far, and the state they left.
struct KernelGraph {
  UOp sink;
  rw::IndexingContext ctx;
};

// rules/rangeify.rw's `earliest`, bottom up over the whole graph (kernel CALL bodies untouched).
// `rules`: another executor of that set (the tests run the interpreted one); the compiled if null.
UOp earliest_rewrites(const UOp& sink, const rw::RuleSetMatcher* rules = nullptr);

// Fills ctx.realize_map by rules/rangeify.rw's `realize_map`, asked about every node of `sink`
// (the roots are sink's sources; every effect in it is pending: one that ran is no longer in a
// graph to schedule). `rules`: as for earliest_rewrites, of `realize_map`.
void generate_realize_map(const UOp& sink, rw::IndexingContext& ctx,
                          const rw::RuleSetMatcher* rules = nullptr);

// The ranges of x's source that x's output ranges `rngs` read, for a movement op x: INDEX(x, rngs)
// pushed one step by rules/rangeify.rw (the movement math realize() lowers with), then simplified
// by rules/symbolic.rw. Empty when x views a constant (a constant has no ranges). A PAD's are
// rules/indexing.rw's `pad_ranges`: a padded axis's index is gated, where(valid, r - off, Invalid).
// `simplify` false: the index math as the rules build it (simplify_ranges later).
std::vector<UOp> apply_movement_op(const UOp& x, const std::vector<UOp>& rngs,
                                   bool simplify = true);

// Index expressions simplified: gates lifted outermost (rules/indexing.rw's lift_gates), then
// rules/symbolic.rw's `sym`.
std::vector<UOp> simplify_ranges(const std::vector<UOp>& rngs);

// Range propagation (tinygrad's run_rangeify without its apply stage), over the graph after the
// realize map: consumers before sources, each node's output ranges are new when it is realized,
// its one consumer's, or its consumers' merged axis by axis (an axis they index differently gets
// a new range and is realized); a node that ends ranges (under a REDUCE's broadcast) realizes its
// axes. Each node's step is rules/indexing.rw's `range_step` (`rules`: another executor of it; the
// compiled if null); this walks and stores. Fills ctx.range_map and the realized axes of
// ctx.realize_map.
void run_rangeify(const UOp& sink, rw::IndexingContext& ctx,
                  const rw::RuleSetMatcher* rules = nullptr);

// Apply rangeify (tinygrad's pm_apply_rangeify): rules/indexing.rw's `apply_rangeify`, bottom up
// over the graph after run_rangeify, turns the range map into index math: buffers indexed, realized
// nodes STAGEd, REDUCEs over ranges, no movement op left. `rules`: another executor of the set.
UOp apply_rangeify(const UOp& sink, rw::IndexingContext& ctx,
                   const rw::RuleSetMatcher* rules = nullptr);

// Cleanups (tinygrad's remove_bufferize): rules/rangeify.rw's `remove_bufferize`, sources before
// users, over the graph after apply_rangeify: a STAGE that is cheap to recompute is replaced, where
// it is read, by its source at the reader's index. `rules`: another executor of the set.
UOp cleanups(const UOp& sink, const rw::RuleSetMatcher* rules = nullptr);

// Add buffers (tinygrad's pm_add_buffers), rules/rangeify.rw's `add_buffers` then `sym`: each
// STAGE left becomes its BUFFER after the kernel that stores it, read at a flat index; then
// `reduce_collapse`.
UOp add_buffers(const UOp& sink, rw::IndexingContext& ctx);

// Split kernels (tinygrad's split_kernels): rules/rangeify.rw's `split_kernels`, sources first;
// each AFTER(buffer, END(STORE ...)) orders the buffer after a kernel CALL(kernel AST, buffer
// states...) instead; then `copy_kernels`: a kernel that moves a buffer to another device's is a
// COPY, and one over two devices' buffers otherwise is refused. The result is the kernel graph
// (rules/spec.rw's spec_kernel_graph).
UOp split_kernels(const UOp& sink);

// Every stage after the realize map, over g: range propagation, apply rangeify, cleanups, add
// buffers, split kernels. The kernel graph: SINK(AFTER(BUFFER, CALL(kernel SINK, args...)), ...).
UOp kernel_graph(KernelGraph& g);

// Function CALLs inlined (rules/call.rw: each RETURNED output its body's value); kernel CALLs stay.
UOp inline_calls(const UOp& sink);

// The realize map over a graph the earliest rewrites ran on (get_kernel_graph's last stage), with
// the facts of the schedule the rules read (assignment hazards, pinned views, the fused depth
// limit; roots and pending effects are read off the graph).
KernelGraph with_realize_map(const UOp& sink, const rw::ScheduleContext& facts = {});

// The stages in order over SINK(roots...): function CALLs inlined, earliest rewrites, realize map.
// `max_fused_depth`: tinyrw's fused depth limit (docs/limits.md; unlimited by default).
KernelGraph get_kernel_graph(const UOp& sink,
                             int max_fused_depth = std::numeric_limits<int>::max());

}  // namespace tinyrw

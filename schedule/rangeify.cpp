// The rangeify pipeline's walks and bookkeeping; every decision is a rule of rules/rangeify.rw or
// rules/indexing.rw.
#include "schedule/rangeify.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <source_location>

#include "codegen/kernel_name.h"
#include "dsl/ruleset.h"
#include "ir/builders.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/viz.h"
#include "rules_gen/call.h"
#include "rules_gen/collapse.h"
#include "rules_gen/indexing.h"
#include "rules_gen/rangeify.h"
#include "rules_gen/symbolic.h"

namespace tinyrw {

namespace {

bool is_effect(const UOp& u) {
  return u.op() == Op::Store || (u.op() == Op::Call && CallInfo::of(u).kernel);
}

// The sources a node reads data from (a movement op's shape operands are no data).
std::vector<UOp> data_srcs(const UOp& c) {
  if (groups::movement().contains(c.op())) return {c.src(0)};
  return {c.src().begin(), c.src().end()};
}

}  // namespace

std::vector<UOp> apply_movement_op(const UOp& x, const std::vector<UOp>& rngs, bool simplify) {
  RewriteContext rctx;  // the movement rules read no context (only REDUCE's does)
  // a PAD's gated ranges are rules/indexing.rw's (rangeify.rw's pad rule gives realize() a value)
  const rw::RuleSetMatcher& moves = x.op() == Op::Pad ? rules::pad_ranges() : rules::rangeify();
  const std::optional<rw::Value> r = moves.apply(x.index(rngs), rctx, nullptr);
  if (!r) throw std::logic_error("apply_movement_op: no movement rule moved the index");
  const UOp idx = r->as_uop();
  if (idx.op() != Op::Index) return {};  // a view of a constant
  const std::vector<UOp> src(idx.src().begin() + 1, idx.src().end());
  return simplify ? simplify_ranges(src) : src;
}

namespace {
// Index math simplified: a gated range (a PAD's) keeps its gate outermost (rules/indexing.rw's
// lift_gates), then rules/symbolic.rw's `sym`.
UOp lift_and_simplify(const UOp& graph, const char* name) {
  const UOp lifted = graph_rewrite(graph, &rules::lift_gates(),
                                   {.bottom_up = true, .enter_calls = false, .name = "lift gates"});
  const UOp simple = graph_rewrite(lifted, &rules::sym(), {.enter_calls = false, .name = name});
  // again: a gate sym folded to false leaves Invalid in index math (lift_gates' `poisoned`)
  return graph_rewrite(simple, &rules::lift_gates(),
                       {.bottom_up = true, .enter_calls = false, .name = "lift gates"});
}
}  // namespace

std::vector<UOp> simplify_ranges(const std::vector<UOp>& rngs) {
  const UOp simple = lift_and_simplify(UOp::sink(rngs), "movement op");
  return {simple.src().begin(), simple.src().end()};
}

void run_rangeify(const UOp& sink, rw::IndexingContext& ctx, const rw::RuleSetMatcher* rules) {
  const rw::RuleSetMatcher& matcher = rules ? *rules : rules::range_step();
  const std::vector<UOp> order = toposort(sink, nullptr, /*enter_calls=*/false);
  std::unordered_map<UOp, std::vector<UOp>> consumers;
  for (const UOp& c : order)
    if (c.op() != Op::Call && c.op() != Op::After)
      for (const UOp& x : data_srcs(c)) consumers[x].push_back(c);
  // the ranges ended at each node, and those a broadcast above it ended (rules/indexing.rw)
  std::unordered_map<UOp, std::vector<UOp>> ending, broadcast_ending;
  std::unordered_map<UOp, UOp> simple;  // each consumer's input ranges simplified, once
  auto simplified = [&](const UOp& c, const std::vector<UOp>& rngs) {
    auto [it, fresh] = simple.try_emplace(c);
    if (fresh) it->second = UOp::sink(simplify_ranges(rngs));
    return it->second;
  };
  RewriteContext rctx{.user = static_cast<rw::ScheduleContext*>(&ctx)};
  // in VIZ one step per node whose axes it realizes, from the node to the rule's answer
  const std::source_location loc = std::source_location::current();
  const int call =
      viz::enabled() ? viz::begin_rewrite("range propagation", loc, sink, 0, "stage") : -1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const UOp& x = *it;
    // the question: SINK(x, SINK(each indexed consumer's input ranges), SINK(ended above it),
    // SINK(a broadcast above ended))
    std::vector<UOp> cs, ends, bcast;
    const std::vector<UOp>& users = consumers[x];
    for (const UOp& c : users) {
      // consumers' index math is simplified only where several compare it (a long chain of
      // views would otherwise be simplified at every step)
      if (auto r = ctx.range_map.find(c); r != ctx.range_map.end())
        cs.push_back(users.size() == 1 ? UOp::sink(r->second.first)
                                       : simplified(c, r->second.first));
      if (auto e = ending.find(c); e != ending.end())
        ends.insert(ends.end(), e->second.begin(), e->second.end());
      if (auto e = broadcast_ending.find(c); e != broadcast_ending.end())
        bcast.insert(bcast.end(), e->second.begin(), e->second.end());
    }
    const UOp q = UOp::sink(std::vector<UOp>{x, UOp::sink(cs), UOp::sink(ends), UOp::sink(bcast)});
    const RuleInfo* fired = nullptr;
    const std::optional<rw::Value> r = matcher.apply(q, rctx, &fired);
    if (!r) continue;
    // the answer: SINK(SINK(out), SINK(in), SINK(ending), SINK(broadcast ending)[, SINK(axes)])
    const UOp a = r->as_uop();
    auto items = [&](size_t i) {
      return std::vector<UOp>(a.src(i).src().begin(), a.src(i).src().end());
    };
    std::vector<UOp> in = items(1);
    // a view's sources are indexed by its movement of those ranges
    // (simplified at a PAD and below its gated ranges only, whose gates must stay outermost:
    // consumers that compare index math simplify it then, and add buffers what kernels read)
    if (groups::movement().contains(x.op()))
      in = apply_movement_op(
          x, in, x.op() == Op::Pad || std::any_of(in.begin(), in.end(), is_gated_index));
    ctx.range_map[x] = {in, items(0)};
    ending[x] = items(2);
    broadcast_ending[x] = items(3);
    if (a.src().size() > 4) {
      std::vector<int> axes;
      for (const UOp& k : a.src(4).src()) axes.push_back(static_cast<int>(k.arg().as_int()));
      ctx.realize_map[x] = axes;
      if (call >= 0) viz::record_match(call, x, a, fired, std::chrono::nanoseconds(0));
    }
  }
  if (call >= 0) viz::end_rewrite(call, sink);
}

UOp apply_rangeify(const UOp& sink, rw::IndexingContext& ctx, const rw::RuleSetMatcher* rules) {
  return graph_rewrite(sink, rules ? rules : &rules::apply_rangeify(),
                       {.ctx = static_cast<rw::ScheduleContext*>(&ctx),
                        .bottom_up = true,
                        .enter_calls = false,
                        .name = "apply rangeify"});
}

UOp cleanups(const UOp& sink, const rw::RuleSetMatcher* rules) {
  return graph_rewrite(sink, rules ? rules : &rules::remove_bufferize(),
                       {.enter_calls = false, .name = "cleanups"});
}

namespace {
// Range propagation, apply rangeify and the cleanups over g: the STAGEs left are the kernels.
UOp cleaned_graph(KernelGraph& g) {
  run_rangeify(g.sink, g.ctx);
  return cleanups(apply_rangeify(g.sink, g.ctx));
}
}  // namespace

UOp add_buffers(const UOp& sink, rw::IndexingContext& ctx) {
  const UOp added = graph_rewrite(sink, &rules::add_buffers(),
                                  {.ctx = static_cast<rw::ScheduleContext*>(&ctx),
                                   .bottom_up = true,
                                   .enter_calls = false,
                                   .name = "add buffers"});
  // then a reduction over a range its value does not use collapses (rules/rangeify.rw)
  return graph_rewrite(lift_and_simplify(added, "buffer indexes"), &rules::reduce_collapse(),
                       {.enter_calls = false, .name = "reduce collapse"});
}

UOp split_kernels(const UOp& sink) {
  const UOp split =
      graph_rewrite(sink, &rules::split_kernels(), {.enter_calls = false, .name = "split kernels"});
  // a kernel between two devices' buffers is a transfer (rules/rangeify.rw's copy_kernels)
  return graph_rewrite(split, &rules::copy_kernels(),
                       {.enter_calls = false, .name = "copy kernels"});
}

UOp kernel_graph(KernelGraph& g) { return split_kernels(add_buffers(cleaned_graph(g), g.ctx)); }

UOp earliest_rewrites(const UOp& sink, const rw::RuleSetMatcher* rules) {
  return graph_rewrite(sink, rules ? rules : &rules::earliest(),
                       {.bottom_up = true, .enter_calls = false, .name = "earliest rewrites"});
}

void generate_realize_map(const UOp& sink, rw::IndexingContext& ctx,
                          const rw::RuleSetMatcher* rules) {
  const rw::RuleSetMatcher& matcher = rules ? *rules : rules::realize_map();
  const std::vector<UOp> order = toposort(sink, nullptr, /*enter_calls=*/false);
  ctx.roots.insert(sink.src().begin(), sink.src().end());
  for (const UOp& u : order)
    if (is_effect(u)) ctx.pending.insert(u);
  // a rule's answer is the SINK of the nodes it realizes; in VIZ one step per answering node
  RewriteContext rctx{.user = static_cast<rw::ScheduleContext*>(&ctx)};
  const std::source_location loc = std::source_location::current();
  const int call = viz::enabled() ? viz::begin_rewrite("realize map", loc, sink, 0, "stage") : -1;
  for (const UOp& u : order) {
    if (u == sink) continue;
    const RuleInfo* fired = nullptr;
    const std::optional<rw::Value> r = matcher.apply(u, rctx, &fired);
    if (!r) {
      ctx.fuse(u);  // the fused depth the depth-limit rule reads
      continue;
    }
    bool realizes_u = false;
    for (const UOp& x : r->as_uop().src()) {
      ctx.realize_map.try_emplace(x, std::nullopt);
      if (!r->as_uop().arg().is_none()) ctx.non_removable.insert(x);  // realized_for_good
      realizes_u |= x == u;
      // a view's source cut below it (the depth limit at a broadcast): a chain starts at its
      // buffer, so the views between it and u continue from there, and u is fused (other users
      // of those views keep their longer depths: cut earlier than needed, never later)
      if (x != u && ctx.depth.erase(x) && groups::movement().contains(u.op())) {
        std::vector<UOp> path;
        for (UOp v = u.src(0); v != x && v.nsrc() > 0; v = v.src(0)) path.push_back(v);
        for (auto it = path.rbegin(); it != path.rend(); ++it) ctx.fuse(*it);
      }
    }
    if (!realizes_u) ctx.fuse(u);
    if (call >= 0) viz::record_match(call, u, r->as_uop(), fired, std::chrono::nanoseconds(0));
  }
  if (call >= 0) viz::end_rewrite(call, sink);
}

UOp inline_calls(const UOp& sink) {
  const std::vector<UOp> nodes = toposort(sink, nullptr, /*enter_calls=*/false);
  if (std::none_of(nodes.begin(), nodes.end(), [](const UOp& u) { return u.op() == Op::Returned; }))
    return sink;
  return graph_rewrite(sink, &rules::calls(), {.enter_calls = false, .name = "inline calls"});
}

KernelGraph with_realize_map(const UOp& sink, const rw::ScheduleContext& facts) {
  KernelGraph g;
  static_cast<rw::ScheduleContext&>(g.ctx) = facts;
  g.sink = sink;
  generate_realize_map(g.sink, g.ctx);
  return g;
}

KernelGraph get_kernel_graph(const UOp& sink, int max_fused_depth) {
  rw::ScheduleContext facts;
  facts.max_fused_depth = max_fused_depth;
  return with_realize_map(earliest_rewrites(inline_calls(sink)), facts);
}

}  // namespace tinyrw

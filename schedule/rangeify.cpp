// The rangeify pipeline's walk and bookkeeping; every decision is a rule of rules/rangeify.rw.
#include "schedule/rangeify.h"

#include <algorithm>
#include <chrono>
#include <source_location>

#include "dsl/ruleset.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/viz.h"
#include "rules_gen/call.h"
#include "rules_gen/rangeify.h"

namespace tinyrw {

namespace {

bool is_effect(const UOp& u) {
  return u.op() == Op::Store || (u.op() == Op::Call && CallInfo::of(u).kernel);
}

}  // namespace

UOp earliest_rewrites(const UOp& sink, const rw::RuleSetMatcher* rules) {
  return graph_rewrite(sink, rules ? rules : &rules::earliest(),
                       {.bottom_up = true, .enter_calls = false, .name = "earliest rewrites"});
}

void generate_realize_map(const UOp& sink, rw::IndexingContext& ctx,
                          const std::function<bool(const UOp&)>& executed,
                          const rw::RuleSetMatcher* rules) {
  const rw::RuleSetMatcher& matcher = rules ? *rules : rules::realize_map();
  auto ran = [&](const UOp& u) { return executed && is_effect(u) && executed(u); };
  const std::vector<UOp> order = toposort(
      sink, [&](const UOp& u) { return !ran(u); }, /*enter_calls=*/false);
  ctx.roots.insert(sink.src().begin(), sink.src().end());
  for (const UOp& u : order)
    if (is_effect(u) && !ran(u)) ctx.pending.insert(u);
  // a rule's answer is the SINK of the nodes it realizes; in VIZ one step per answering node
  RewriteContext rctx{.user = static_cast<rw::ScheduleContext*>(&ctx)};
  const std::source_location loc = std::source_location::current();
  const int call = viz::enabled() ? viz::begin_rewrite("realize map", loc, sink, 0, "stage") : -1;
  for (const UOp& u : order) {
    if (u == sink) continue;
    const RuleInfo* fired = nullptr;
    const std::optional<rw::Value> r = matcher.apply(u, rctx, &fired);
    if (!r) continue;
    for (const UOp& x : r->as_uop().src()) ctx.realize_map.try_emplace(x, std::nullopt);
    if (call >= 0) viz::record_match(call, u, r->as_uop(), fired, std::chrono::nanoseconds(0));
  }
  if (call >= 0) viz::end_rewrite(call, sink);
}

KernelGraph get_kernel_graph(const UOp& sink, const std::function<bool(const UOp&)>& executed) {
  KernelGraph g;
  g.sink = sink;
  // function CALLs inlined (their RETURNED outputs); kernel CALLs stay
  const std::vector<UOp> nodes = toposort(sink, nullptr, /*enter_calls=*/false);
  if (std::any_of(nodes.begin(), nodes.end(), [](const UOp& u) { return u.op() == Op::Returned; }))
    g.sink = graph_rewrite(g.sink, &rules::calls(), {.enter_calls = false, .name = "inline calls"});
  g.sink = earliest_rewrites(g.sink);
  generate_realize_map(g.sink, g.ctx, executed);
  return g;
}

}  // namespace tinyrw

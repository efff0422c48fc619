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
#include "rules_gen/symbolic.h"

namespace tinyrw {

namespace {

bool is_effect(const UOp& u) {
  return u.op() == Op::Store || (u.op() == Op::Call && CallInfo::of(u).kernel);
}

// A new output range of size s (tinygrad's new_range): a size-1 axis is index 0, no loop.
UOp new_range(rw::IndexingContext& ctx, const SInt& s, AxisType t = AxisType::Weak) {
  if (s.is_int() && s.value() == 1) return UOp::cint(0);
  return UOp::range(s.as_uop(), ctx.next_range++, t);
}

// The RANGEs an index expression uses, each once.
std::vector<UOp> ranges_in(const std::vector<UOp>& idx) {
  std::vector<UOp> out;
  for (const UOp& u : toposort(UOp::sink(idx)))
    if (u.op() == Op::Range) out.push_back(u);
  return out;
}

// The sources a node reads data from (a movement op's shape operands are no data).
std::vector<UOp> data_srcs(const UOp& c) {
  if (groups::movement().contains(c.op())) return {c.src(0)};
  return {c.src().begin(), c.src().end()};
}

}  // namespace

std::vector<UOp> apply_movement_op(const UOp& x, const std::vector<UOp>& rngs) {
  if (x.op() == Op::Pad) throw GraphError("apply_movement_op: PAD is not handled yet");
  RewriteContext rctx;  // the movement rules read no context (only REDUCE's does)
  const std::optional<rw::Value> r = rules::rangeify().apply(x.index(rngs), rctx, nullptr);
  if (!r) throw std::logic_error("apply_movement_op: no rule of rules/rangeify.rw moved the index");
  const UOp idx = r->as_uop();
  if (idx.op() != Op::Index) return {};  // a view of a constant
  const std::vector<UOp> src(idx.src().begin() + 1, idx.src().end());
  const UOp simple = graph_rewrite(UOp::sink(src), &rules::sym(), {.name = "movement op"});
  return {simple.src().begin(), simple.src().end()};
}

void run_rangeify(const UOp& sink, rw::IndexingContext& ctx) {
  const std::vector<UOp> order = toposort(sink, nullptr, /*enter_calls=*/false);
  std::unordered_map<UOp, std::vector<UOp>> consumers;
  for (const UOp& c : order)
    if (c.op() != Op::Call && c.op() != Op::After)
      for (const UOp& x : data_srcs(c)) consumers[x].push_back(c);
  // ranges ended above each node; and the ranges a broadcast above ended, on their way down
  // through views to the first node that computes (tinygrad broadcasts implicitly, in the
  // elementwise op: those ranges do not realize the op broadcast, only what is below it)
  std::unordered_map<UOp, std::vector<UOp>> ending, broadcast_ending;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const UOp& x = *it;
    // kernels keep their own ranges; an AFTER has none
    if (x.op() == Op::Call || x.op() == Op::After || x.op() == Op::Sink) continue;
    std::vector<UOp>& ends = ending[x];
    std::vector<UOp> bcast;
    std::vector<std::vector<UOp>> consumer_rngs;
    for (const UOp& c : consumers[x]) {
      if (auto e = ending.find(c); e != ending.end())
        ends.insert(ends.end(), e->second.begin(), e->second.end());
      if (auto e = broadcast_ending.find(c); e != broadcast_ending.end())
        bcast.insert(bcast.end(), e->second.begin(), e->second.end());
      if (auto r = ctx.range_map.find(c); r != ctx.range_map.end())
        consumer_rngs.push_back(r->second.first);
    }
    const bool is_view = groups::movement().contains(x.op());
    // a REDUCE under a broadcast ends those ranges itself (and its sources see them ended too)
    if (x.op() == Op::Reduce) ends.insert(ends.end(), bcast.begin(), bcast.end());
    const Shape shape = x.shape();
    std::vector<UOp> out;
    if (auto rz = ctx.realize_map.find(x); rz != ctx.realize_map.end()) {
      // realized: new ranges over its whole output, which end every range above it
      for (const SInt& s : shape) out.push_back(new_range(ctx, s));
      std::vector<int> all(shape.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
      rz->second = all;
      ends.clear();
    } else if (consumer_rngs.empty()) {
      continue;  // nothing indexes it: no ranges
    } else if (consumer_rngs.size() == 1) {
      out = consumer_rngs[0];
    } else {
      // several consumers: an axis all index alike keeps that index, else the whole node gets
      // new ranges and is realized on every axis (tinygrad without partial contiguity)
      bool same = true;
      for (const auto& r : consumer_rngs) same = same && r == consumer_rngs[0];
      if (same) {
        out = consumer_rngs[0];
      } else {
        std::vector<int> axes;
        for (size_t i = 0; i < shape.size(); ++i) {
          out.push_back(new_range(ctx, shape[i]));
          axes.push_back(static_cast<int>(i));
        }
        ctx.realize_map[x] = axes;
      }
    }
    // an op that computes while ranges above it end (a REDUCE under a broadcast): realized
    if (!ends.empty() && (groups::elementwise().contains(x.op()) || x.op() == Op::Reduce)) {
      std::vector<int> axes;
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = new_range(ctx, shape[i]);
        axes.push_back(static_cast<int>(i));
      }
      if (!axes.empty()) ctx.realize_map[x] = axes;
      ends.clear();
    }
    // a view passes the broadcast's ranges on; the op that computes (or a realized view) ends
    // them for its sources
    if (is_view && !ctx.realize_map.contains(x))
      broadcast_ending[x] = bcast;
    else
      ends.insert(ends.end(), bcast.begin(), bcast.end());
    // the ranges its sources are indexed by
    std::vector<UOp> in = out;
    if (is_view) in = apply_movement_op(x, out);
    // a broadcast ends the ranges of the axes it broadcasts
    if (x.op() == Op::Expand) {
      const Shape from = x.src(0).shape();
      std::vector<UOp> axes;
      for (size_t i = 0; i < from.size(); ++i)
        if (from[i].is_int() && from[i].value() == 1 &&
            !(shape[i].is_int() && shape[i].value() == 1))
          axes.push_back(out[i]);
      for (const UOp& r : ranges_in(axes)) broadcast_ending[x].push_back(r);
    }
    // a REDUCE loops over new ranges for the axes it reduces (its first n)
    if (x.op() == Op::Reduce) {
      const Shape from = x.src(0).shape();
      std::vector<UOp> red;
      for (int64_t i = 0; i < x.arg().items()[1].as_int(); ++i)
        red.push_back(new_range(ctx, from[static_cast<size_t>(i)], AxisType::Reduce));
      in.insert(in.begin(), red.begin(), red.end());
    }
    ctx.range_map[x] = {in, out};
  }
}

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

// The facts rules/rangeify.rw's realize map decides by, read from the ScheduleContext that
// tensor/realize.cpp fills: analyses of the whole schedule (which tensors are asked for, which
// assignments read what others write, how deep a fused chain is), not rewrites. Outside a
// realize (no context) they describe an empty schedule: no roots, nothing pending, no depth limit.
#include "rules/helpers/schedule.h"

#include <algorithm>

#include "dsl/typed_helper.h"
#include "ir/builders.h"

namespace tinyrw::rw {

int ScheduleContext::fused_depth(const UOp& u) const {
  if (!groups::elementwise().contains(u.op()) && !groups::movement().contains(u.op())) return 0;
  int d = 1;
  for (const UOp& s : u.src())
    if (auto it = depth.find(s); it != depth.end()) d = std::max(d, it->second + 1);
  return d;
}

void ScheduleContext::fuse(const UOp& u) {
  if (const int d = fused_depth(u); d > 0) depth[u] = d;
}

UOp ScheduleContext::broadcast_source(const UOp& u) const {
  UOp x;
  for (UOp v = u; groups::movement().contains(v.op()) && (v == u || depth.contains(v));
       v = v.src(0))
    if (v.op() == Op::Expand) x = v.src(0);  // the lowest EXPAND's source wins
  return x && depth.contains(x) ? x : UOp();
}

namespace {

const ScheduleContext& schedule(const RewriteContext& ctx) {
  static const ScheduleContext kEmpty;
  return ctx.user ? ctx.as<ScheduleContext>() : kEmpty;
}

// A set membership fact: `name(u)` is whether u is in the context's set `member`.
Helper fact(const char* name, std::unordered_set<UOp> ScheduleContext::*member) {
  Helper h{name, 1, 1, Type::Bool, nullptr, {Type::UOp}};
  h.fn = [member](RewriteContext& ctx, std::span<const Value> a) {
    return Value::boolean((schedule(ctx).*member).contains(a[0].as_uop()));
  };
  return h;
}

const HelperRegistrar kIsRoot(fact("is_root", &ScheduleContext::roots));
const HelperRegistrar kPending(fact("pending", &ScheduleContext::pending));
const HelperRegistrar kReadsPendingWrite(fact("reads_pending_write", &ScheduleContext::hazards));
const HelperRegistrar kPinned(fact("pinned", &ScheduleContext::pinned));
const HelperRegistrar kExecuted(fact("executed", &ScheduleContext::executed));

const HelperRegistrar kFusedDepth(typed_helper(
    "fused_depth",
    +[](RewriteContext& ctx, const UOp& u) { return i128{schedule(ctx).fused_depth(u)}; }));
const HelperRegistrar kMaxFusedDepth(typed_helper(
    "max_fused_depth", +[](RewriteContext& ctx) { return i128{schedule(ctx).max_fused_depth}; }));
const HelperRegistrar kBroadcastSource(typed_helper(
    "broadcast_source",
    +[](RewriteContext& ctx, const UOp& u) { return schedule(ctx).broadcast_source(u); }));

}  // namespace
}  // namespace tinyrw::rw

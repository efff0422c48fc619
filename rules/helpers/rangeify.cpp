// The one piece of rules/rangeify.rw that is state, not a rewrite: fresh RANGE numbers, which are
// unique within a kernel and counted by the pass's RangeifyContext.
#include "rules/helpers/rangeify.h"

#include "dsl/typed_helper.h"

namespace tinyrw::rw {
namespace {

// One new RANGE per size (an int, or a UOp for a symbolic size), numbered in order.
std::vector<Value> new_ranges(RewriteContext& ctx, const std::vector<Value>& sizes) {
  if (!ctx.user) throw EvalError("new_ranges needs a RangeifyContext");
  auto& rc = ctx.as<RangeifyContext>();
  std::vector<Value> out;
  for (const Value& s : sizes)
    out.push_back(
        Value::uop(UOp::range(s.is_uop() ? s.as_uop() : UOp::cint(s.as_int()), rc.next_axis++)));
  return out;
}

const HelperRegistrar kNewRanges(typed_helper("new_ranges", &new_ranges));

}  // namespace
}  // namespace tinyrw::rw

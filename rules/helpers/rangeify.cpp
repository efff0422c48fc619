// The one piece of rules/rangeify.rw that is state, not a rewrite: fresh RANGE numbers, which are
// unique within a kernel and counted by the pass's RangeifyContext.
#include "rules/helpers/rangeify.h"

#include "dsl/value.h"

namespace tinyrw::rw {
namespace {

// One new RANGE per size (an int, or a UOp for a symbolic size), numbered in order.
Value new_ranges(RewriteContext& ctx, const Value& sizes) {
  if (!ctx.user) throw EvalError("new_ranges needs a RangeifyContext");
  auto& rc = ctx.as<RangeifyContext>();
  std::vector<Value> out;
  for (const Value& s : sizes.items())
    out.push_back(
        Value::uop(UOp::range(s.is_uop() ? s.as_uop() : UOp::cint(s.as_int()), rc.next_axis++)));
  return Value::tuple(std::move(out));
}

const HelperRegistrar kNewRanges({"new_ranges", 1, 1, Type::Tuple,
                                  [](RewriteContext& ctx, std::span<const Value> a) {
                                    return new_ranges(ctx, a[0]);
                                  },
                                  "new_ranges(sizes): a new RANGE of each size, numbered by the "
                                  "pass's RangeifyContext"});

}  // namespace
}  // namespace tinyrw::rw

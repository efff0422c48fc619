// The one piece of rules/rangeify.rw that is state, not a rewrite: fresh RANGE numbers, which are
// unique within a kernel and counted by the pass's RangeifyContext; and the graph walk the
// rangeify pipeline's rules read (schedule/rangeify.cpp).
#include "rules/helpers/rangeify.h"

#include <fmt/format.h>

#include "dsl/typed_helper.h"
#include "ir/graph.h"

namespace tinyrw::rw {
namespace {

// One new RANGE per size (an int, or a UOp for a symbolic size), numbered in order, of the axis
// type named `type` ("REDUCE").
std::vector<Value> new_ranges(RewriteContext& ctx, const std::vector<Value>& sizes,
                              const std::string& type) {
  if (!ctx.user) throw EvalError("new_ranges needs a RangeifyContext");
  const std::optional<AxisType> t = axis_type_from_name(type);
  if (!t) throw EvalError(fmt::format("new_ranges: unknown axis type '{}'", type));
  auto& rc = ctx.as<RangeifyContext>();
  std::vector<Value> out;
  for (const Value& s : sizes)
    out.push_back(Value::uop(
        UOp::range(s.is_uop() ? s.as_uop() : UOp::cint(s.as_int()), rc.next_axis++, *t)));
  return out;
}

const HelperRegistrar kNewRanges(typed_helper("new_ranges", &new_ranges));

// Kept C++: a walk of the whole graph (any size; toposort() gives none past the tuple limit).
const HelperRegistrar kInGraph(typed_helper(
    "in_graph", +[](const UOp& x, const UOp& g) {
      for (const UOp& u : toposort(g, nullptr, /*enter_calls=*/false))
        if (u == x) return true;
      return false;
    }));

}  // namespace
}  // namespace tinyrw::rw

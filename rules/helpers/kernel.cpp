// The one fact the kernel verifiers of rules/spec.rw read from C++, the axis type names of
// ir/axis.h (a table, not a rewrite), and the register numbering of rules/reduce.rw.
#include "rules/helpers/kernel.h"

#include "dsl/typed_helper.h"
#include "ir/axis.h"
#include "ir/uop.h"

namespace tinyrw::rw {
namespace {

// C++: the table of ir/axis.h, which the IR and the devices use.
const HelperRegistrar kAxisTypeNames(typed_helper(
    "axis_type_names", +[]() {
      std::vector<Value> out;
      for (const AxisTypeInfo& i : axis_types()) out.push_back(Value::string(std::string(i.name)));
      return out;
    }));

// One register per call (the rewrite asks once per REDUCE): slots -1, -2, ... in this kernel.
const HelperRegistrar kAccumulator(typed_helper(
    "accumulator", +[](RewriteContext& ctx, const UOp& r) {
      if (!ctx.user) throw EvalError("accumulator needs a KernelContext");
      const int64_t slot = -(++ctx.as<KernelContext>().accumulators);
      return UOp::make(Op::Buffer, r.dtype(), {},
                       Arg::record("ParamArg", {{"slot", Arg::integer(slot)},
                                                {"size", Arg::integer(1)},
                                                {"addrspace", Arg::string("REG")}}));
    }));

}  // namespace
}  // namespace tinyrw::rw

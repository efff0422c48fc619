// The one fact the kernel verifiers of rules/spec.rw read from C++, the axis type names of
// ir/axis.h (a table, not a rewrite), the register numbering of rules/reduce.rw, the target of
// rules/decompositions.rw and rules/devectorizer.rw, and the record args of the kernels
// rules/rangeify.rw's split_kernels builds.
#include "rules/helpers/kernel.h"

#include "codegen/kernel_name.h"
#include "codegen/target.h"
#include "dsl/typed_helper.h"
#include "ir/axis.h"
#include "ir/call.h"
#include "ir/kernel_info.h"
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

// One register per call (the rewrite asks once per REDUCE): slots -1, -2, ... in this kernel, one
// element per lane of the reduction.
const HelperRegistrar kAccumulator(typed_helper(
    "accumulator", +[](RewriteContext& ctx, const UOp& r) {
      if (!ctx.user) throw EvalError("accumulator needs a KernelContext");
      const int64_t slot = -(++ctx.as<KernelContext>().accumulators);
      int64_t lanes = 1;  // one element per lane of a reduction the expander shaped
      for (const SInt& d : r.shape()) lanes *= d.value();
      return UOp::make(
          Op::Buffer, r.dtype(), {},
          Arg::record("ParamArg",
                      {{"slot", Arg::integer(slot)},
                       {"size", Arg::integer(lanes)},
                       {"addrspace", Arg::string(std::string(addrspace_name(AddrSpace::Reg)))}}));
    }));

// Whether the renderer of the program's target computes `op` giving `dtype` (codegen/target.h):
// the late decompositions rewrite the ops it does not.
const HelperRegistrar kRenders(typed_helper(
    "renders", +[](RewriteContext& ctx, Op op, DType dtype) {
      if (!ctx.user || !ctx.as<KernelContext>().target)
        throw EvalError("renders() needs a KernelContext with a target");
      return ctx.as<KernelContext>().target->renders(op, dtype);
    }));

// The widest vector access of the target, in bytes (codegen/target.h): rules/devectorizer.rw
// coalesces runs of lanes up to it.
const HelperRegistrar kVectorBytes(typed_helper(
    "vector_bytes", +[](RewriteContext& ctx) {
      if (!ctx.user || !ctx.as<KernelContext>().target)
        throw EvalError("vector_bytes() needs a KernelContext with a target");
      return static_cast<i128>(ctx.as<KernelContext>().target->vector_bytes);
    }));

// PADTO's range and its size before the pad, for rules/opts.rw (none outside a PADTO).
const HelperRegistrar kPadded(typed_helper(
    "padded", +[](RewriteContext& ctx) -> Value {
      if (!ctx.user) throw EvalError("padded() needs a KernelContext");
      const KernelContext& k = ctx.as<KernelContext>();
      if (!k.padded_range) return Value();
      return Value::tuple({Value::uop(k.padded_range), Value::integer(k.padded_size)});
    }));

// The record args of a kernel (no .rw literal spells a record): a PARAM's, the kernel SINK's (its
// name from its ranges, codegen/kernel_name.h) and the kernel CALL's (the effect number it
// carries).
const HelperRegistrar kParamArg(typed_helper(
    "param_arg", +[](i128 slot) {
      return Value::record(Arg::record("ParamArg", {{"slot", Arg::integer(slot)}}));
    }));
const HelperRegistrar kKernelInfo(typed_helper(
    "kernel_info", +[](const UOp& body) {
      return Value::record(KernelInfo{.name = kernel_name(body)}.to_arg());
    }));
const HelperRegistrar kKernelCallInfo(typed_helper(
    "kernel_call_info", +[](const std::string& name, i128 id) {
      return Value::record(
          CallInfo{.name = name, .kernel = true, .id = static_cast<int64_t>(id)}.to_arg());
    }));

}  // namespace
}  // namespace tinyrw::rw

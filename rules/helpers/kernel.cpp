// The one fact the kernel verifiers of rules/spec.rw read from C++, the axis type names of
// ir/axis.h (a table, not a rewrite), the register numbering of rules/reduce.rw, the target of
// rules/decompositions.rw and rules/devectorizer.rw, and the record args of the kernels
// rules/rangeify.rw's split_kernels builds.
#include "rules/helpers/kernel.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/kernel_name.h"
#include "codegen/linearize.h"
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

// One register per call (the rewrite asks once per REDUCE): slots -1, -2, ... in this kernel, of
// r's dtype and `size` elements (rules/reduce.rw: one per lane it keeps, padded).
const HelperRegistrar kAccumulator(typed_helper(
    "accumulator", +[](RewriteContext& ctx, const UOp& r, i128 size) {
      if (!ctx.user) throw EvalError("accumulator needs a KernelContext");
      if (size < 1)
        throw EvalError(fmt::format("accumulator of {} elements", static_cast<int64_t>(size)));
      const int64_t slot = -(++ctx.as<KernelContext>().accumulators);
      return UOp::make(
          Op::Buffer, r.dtype(), {},
          Arg::record("ParamArg",
                      {{"slot", Arg::integer(slot)},
                       {"size", Arg::integer(static_cast<int64_t>(size))},
                       {"addrspace", Arg::string(std::string(addrspace_name(AddrSpace::Reg)))}}));
    }));

const KernelContext& with_target(RewriteContext& ctx, const char* helper) {
  if (!ctx.user || !ctx.as<KernelContext>().target)
    throw EvalError(fmt::format("{}() needs a KernelContext with a target", helper));
  return ctx.as<KernelContext>();
}

// Whether the renderer of the program's target computes `op` giving `dtype` (codegen/target.h):
// the late decompositions rewrite the ops it does not.
const HelperRegistrar kRenders(typed_helper(
    "renders", +[](RewriteContext& ctx, Op op, DType dtype) {
      return with_target(ctx, "renders").target->renders(op, dtype);
    }));

// The widest vector access of the target, in bytes (codegen/target.h): rules/devectorizer.rw
// coalesces runs of lanes up to it.
const HelperRegistrar kVectorBytes(typed_helper(
    "vector_bytes", +[](RewriteContext& ctx) {
      return static_cast<i128>(with_target(ctx, "vector_bytes").target->vector_bytes);
    }));

// Whether the target's vector accesses may start at any element (codegen/target.h):
// rules/devectorizer.rw then starts runs where a root's lanes start, not at multiples of their
// length.
const HelperRegistrar kUnalignedVectors(typed_helper(
    "unaligned_vectors", +[](RewriteContext& ctx) {
      return with_target(ctx, "unaligned_vectors").target->unaligned_vectors;
    }));

// Whether the target's renderer computes float32 ALU ops on vectors (codegen/target.h):
// rules/devectorizer.rw's vectorize_alu then gathers isomorphic lanes into vector ops.
const HelperRegistrar kVectorAlu(typed_helper(
    "vector_alu",
    +[](RewriteContext& ctx) { return with_target(ctx, "vector_alu").target->vector_alu; }));

// Whether the program's target launches workgroups (GPU-shaped kernels: rules/gpudims.rw).
const HelperRegistrar kWorkgroups(typed_helper(
    "workgroups",
    +[](RewriteContext& ctx) { return with_target(ctx, "workgroups").target->has_local; }));

// tinygrad's _group_dims: neighbouring dims merged (the first pair whose product fits) until there
// are at most as many as limits and each fits; nothing when no merge is left.
std::optional<std::vector<int64_t>> grouped(std::vector<int64_t> dims,
                                            const std::array<int64_t, 3>& limits) {
  auto fits = [&] {
    for (size_t i = 0; i < dims.size() && i < limits.size(); ++i)
      if (dims[i] > limits[i]) return false;
    return dims.size() <= limits.size();
  };
  while (!fits()) {
    bool merged = false;
    for (size_t i = 0; i < limits.size() && i + 1 < dims.size(); ++i)
      if (dims[i] * dims[i + 1] <= limits[i]) {
        dims[i] *= dims[i + 1];
        dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        merged = true;
        break;
      }
    if (!merged) return std::nullopt;
  }
  return dims;
}

// tinygrad's _split_dims: a dim over its limit gives its smallest factor to the next dim (the
// last to the first) until each fits; three dims at most, two when the third is 1.
std::vector<int64_t> split(const std::vector<int64_t>& dims, const std::array<int64_t, 3>& limits) {
  bool fit = true;
  for (size_t i = 0; i < dims.size() && i < limits.size(); ++i) fit = fit && dims[i] <= limits[i];
  if (fit) return dims;
  std::vector<int64_t> d = dims;
  d.resize(3, 1);
  for (size_t i = 0; i < 3; ++i)
    while (d[i] > limits[i]) {
      int64_t div = 1;
      for (int64_t k = 2; k * k <= d[i] || (k - 1) * (k - 1) < d[i]; ++k)
        if (d[i] % k == 0) {
          div = k;
          break;
        }
      if (div == 1)
        throw EvalError(fmt::format("the launch dimensions ({}) do not fit the limits ({})",
                                    fmt::join(dims, ", "), fmt::join(limits, ", ")));
      d[i] /= div;
      d[(i + 1) % 3] *= div;
    }
  if (d[2] == 1) d.resize(2);
  return d;
}

// tinygrad's get_grouped_dims sizing: dims grouped to fit the limits where they can, else split.
std::vector<int64_t> limited(const std::vector<int64_t>& dims,
                             const std::array<int64_t, 3>& limits) {
  const std::optional<std::vector<int64_t>> g = grouped(dims, limits);
  if (!g && dims.size() > limits.size())
    throw EvalError(fmt::format("the {} launch dimensions ({}) cannot be grouped into 3",
                                dims.size(), fmt::join(dims, ", ")));
  if (g && *g != dims) return *g;
  return split(dims, limits);
}

std::vector<int64_t> ints_of(const std::vector<Value>& t) {
  std::vector<int64_t> out;
  for (const Value& v : t) out.push_back(static_cast<int64_t>(v.as_int()));
  return out;
}
Value tuple_of(const std::vector<int64_t>& t) {
  std::vector<Value> out;
  for (int64_t v : t) out.push_back(Value::integer(v));
  return Value::tuple(std::move(out));
}

// The launch of a GPU-shaped kernel (rules/gpudims.rw): its global dims (innermost first, gidx0
// the innermost) and local dims fitted to the target's limits, as (global, local). A target with
// a limit on workgroups times threads along a dimension (HIP) lowers the global limit by the
// local size there.
const HelperRegistrar kLaunchShape(typed_helper(
    "launch_shape",
    +[](RewriteContext& ctx, const std::vector<Value>& global, const std::vector<Value>& local) {
      const Target& t = *with_target(ctx, "launch_shape").target;
      const std::vector<int64_t> l = limited(ints_of(local), t.local_max);
      std::array<int64_t, 3> gmax = t.global_max;
      for (size_t i = 0; i < 3; ++i)
        if (t.global_prod_max[i] > 0)
          gmax[i] = std::min(gmax[i], t.global_prod_max[i] / (i < l.size() ? l[i] : 1));
      return std::vector<Value>{tuple_of(limited(ints_of(global), gmax)), tuple_of(l)};
    }));

// A workgroup's shared memory of r's dtype and `size` elements (rules/reduce.rw's grouped
// reductions), numbered with the registers.
const HelperRegistrar kLocalBuffer(typed_helper(
    "local_buffer", +[](RewriteContext& ctx, const UOp& r, i128 size) {
      if (!ctx.user) throw EvalError("local_buffer needs a KernelContext");
      const int64_t slot = -(++ctx.as<KernelContext>().accumulators);
      return UOp::make(
          Op::Buffer, r.dtype(), {},
          Arg::record("ParamArg",
                      {{"slot", Arg::integer(slot)},
                       {"size", Arg::integer(static_cast<int64_t>(size))},
                       {"addrspace", Arg::string(std::string(addrspace_name(AddrSpace::Local)))}}));
    }));

// Where a BUFFER's (or an AFTER of one's) memory is: "GLOBAL" (an argument), "LOCAL" (a
// workgroup's shared memory) or "REG" (a register of the run).
const HelperRegistrar kAddrspace(typed_helper(
    "addrspace", +[](const UOp& b) {
      return std::string(addrspace_name(buffer_addrspace(b.under(Op::After))));
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

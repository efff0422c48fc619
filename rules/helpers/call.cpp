// Facts about CALLs and buffers for rules/call.rw and rules/gradient.rw: analyses and builders of
// ir/call.h and ir/builders.h, exposed to the rules. None of them is a rewrite: the rules decide.
#include <fmt/format.h>

#include "dsl/value.h"
#include "ir/builders.h"
#include "ir/call.h"

namespace tinyrw::rw {
namespace {

size_t count_arg(const Value& v) {
  if (v.as_int() < 0) throw EvalError("expected a count or index >= 0, got " + v.repr());
  return static_cast<size_t>(v.as_int());
}

// Kept C++: the CALL's arg is a CallInfo record, which the rules see as text only.
const HelperRegistrar kIsKernelCall({"is_kernel_call", 1, 1, Type::Bool,
                                     [](RewriteContext&, std::span<const Value> a) {
                                       return Value::boolean(CallInfo::of(a[0].as_uop()).kernel);
                                     },
                                     "is_kernel_call(call): a kernel CALL (in-place effects)"});
const HelperRegistrar kCallName({"call_name", 1, 1, Type::String,
                                 [](RewriteContext&, std::span<const Value> a) {
                                   return Value::string(CallInfo::of(a[0].as_uop()).name);
                                 },
                                 "call_name(call): the CALL's name, for messages"});
const HelperRegistrar kHasGradFn({"has_grad_fn", 1, 1, Type::Bool,
                                  [](RewriteContext&, std::span<const Value> a) {
                                    return Value::boolean(CallInfo::of(a[0].as_uop()).grad_fn >= 0);
                                  },
                                  "has_grad_fn(call): a CALL with a registered gradient function"});
const HelperRegistrar kIsPrecompiled(
    {"is_precompiled", 1, 1, Type::Bool,
     [](RewriteContext&, std::span<const Value> a) {
       return Value::boolean(CallInfo::of(a[0].as_uop()).precompile);
     },
     "is_precompiled(call): a function CALL whose body runs as kernels of its own"});

// Kept C++: binding PARAMs is a substitution over the whole body (not entering nested CALLs).
const HelperRegistrar kInlineOutput(
    {"inline_output", 2, 2, Type::UOp,
     [](RewriteContext&, std::span<const Value> a) {
       return Value::uop(inline_output(a[0].as_uop(), count_arg(a[1])));
     },
     "inline_output(call, i): output i of a function CALL, its body's PARAMs bound to the "
     "arguments"});

// Kept C++: walks an assignment chain of any length.
const HelperRegistrar kAfterBase({"after_base", 1, 1, Type::UOp,
                                  [](RewriteContext&, std::span<const Value> a) {
                                    UOp u = a[0].as_uop();
                                    while (u.op() == Op::After) u = u.src(0);
                                    return Value::uop(u);
                                  },
                                  "after_base(u): what an assignment chain AFTER(AFTER(x, ...), "
                                  "...) reads, x"});
const HelperRegistrar kIsBufferView(
    {"is_buffer_view", 1, 1, Type::Bool,
     [](RewriteContext&, std::span<const Value> a) {
       return Value::boolean(is_buffer_view(a[0].as_uop()));
     },
     "is_buffer_view(u): how a tensor holds a whole buffer (ir/builders.h)"});

// Kept C++: walks views and assignment chains of any length.
const HelperRegistrar kStorageRoot({"storage_root", 1, 1, Type::UOp,
                                    [](RewriteContext&, std::span<const Value> a) {
                                      return Value::uop(storage_root(a[0].as_uop()));
                                    },
                                    "storage_root(u): the BUFFER (or PARAM) a view or assignment "
                                    "addresses"});
// Kept C++: the access analysis reads the body's loads and stores (ir/call.h).
const HelperRegistrar kCallWrites({"call_writes", 1, 1, Type::Tuple,
                                   [](RewriteContext&, std::span<const Value> a) {
                                     std::vector<Value> out;
                                     for (size_t w : call_access(a[0].as_uop()).writes)
                                       out.push_back(Value::integer(static_cast<i128>(w)));
                                     return Value::tuple(std::move(out));
                                   },
                                   "call_writes(call): the argument slots a kernel CALL writes, "
                                   "ascending"});
const HelperRegistrar kCallOutputs({"call_outputs", 1, 1, Type::Int,
                                    [](RewriteContext&, std::span<const Value> a) {
                                      return Value::integer(
                                          static_cast<i128>(call_outputs(a[0].as_uop())));
                                    },
                                    "call_outputs(call): the number of outputs of a CALL"});
// Kept C++: the bundle's form is shared with the gradient pass, which adds bundles up.
const HelperRegistrar kCallGradBundle(
    {"call_grad_bundle", 3, 3, Type::UOp,
     [](RewriteContext&, std::span<const Value> a) {
       const size_t n = count_arg(a[0]), i = count_arg(a[1]);
       if (i >= n) throw EvalError(fmt::format("output {} of a CALL with {} outputs", i, n));
       return Value::uop(call_grad_bundle(n, i, a[2].as_uop()));
     },
     "call_grad_bundle(n, i, g): the gradients of a CALL's n outputs, g for output i alone"});

}  // namespace
}  // namespace tinyrw::rw

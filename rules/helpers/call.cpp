// inline_call for rules/call.rw: output i of a function CALL as its body over the arguments.
#include "ir/call.h"
#include "dsl/value.h"
#include "ir/builders.h"

namespace tinyrw::rw {
namespace {

// Already in a buffer of its own (or computed into one): a precompiled call reads it as it is.
bool in_buffer(const UOp& u) {
  UOp base = u;  // an assignment chain reads its buffer
  while (base.op() == Op::After) base = base.src(0);
  return base.op() == Op::Contiguous || is_buffer_view(base);
}
UOp to_buffer(const UOp& u) { return in_buffer(u) ? u : UOp::make(Op::Contiguous, u.dtype(), {u}); }

Value inline_call(const UOp& r) {
  const UOp& call = r.src(0);
  const CallInfo info = CallInfo::of(call);
  if (info.kernel) return Value();  // kernel CALLs are scheduled, not inlined
  const size_t i = static_cast<size_t>(r.arg().as_int());
  if (!info.precompile) return Value::uop(inline_output(call, i));
  // precompiled: the body runs as kernels of its own, from inputs in buffers to outputs in
  // buffers, so nothing outside fuses into it
  std::vector<UOp> src{call.src(0)};
  for (size_t k = 1; k < call.nsrc(); ++k) src.push_back(to_buffer(call.src(k)));
  return Value::uop(to_buffer(inline_output(call.with_src(src), i)));
}

const HelperRegistrar kInlineCall(
    {"inline_call", 1, 1, Type::UOp,
     [](RewriteContext&, std::span<const Value> a) { return inline_call(a[0].as_uop()); },
     "inline_call(returned): output i of a function CALL, its body bound to the arguments"},
    {Type::UOp});

}  // namespace
}  // namespace tinyrw::rw

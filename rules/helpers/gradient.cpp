// Gradients for rules/gradient.rw that need more than a rewrite: AFTER and RETURNED route a
// gradient by reading a CALL's accesses and bundling its outputs (ir/call.h), each one per source.
#include <optional>

#include <fmt/format.h>

#include "dsl/value.h"
#include "ir/call.h"

namespace tinyrw::rw {
namespace {

// A kernel CALL `call` among an AFTER's deps over t: the index of the output it gives t (the
// argument it writes that is t), or none when it only reads t. Aliasing t another way, or as two
// arguments, leaves the output's gradient ambiguous and is refused.
std::optional<size_t> call_output_for(const UOp& call, const UOp& t) {
  const std::string name = CallInfo::of(call).name;
  std::vector<size_t> outputs;
  for (size_t w : call_access(call).writes) {
    const UOp& arg = call.src(w + 1);
    if (arg == t) {
      outputs.push_back(w);
    } else if (storage_root(arg) == storage_root(t)) {
      throw EvalError(fmt::format(
          "gradient through an aliased write: CALL '{}' writes argument {}, another view of the "
          "buffer this AFTER returns",
          name, w));
    }
  }
  if (outputs.empty()) return std::nullopt;
  for (size_t k = 0; k + 1 < call.nsrc(); ++k)
    if (k != outputs[0] && call.src(k + 1) == t)
      throw EvalError(fmt::format(
          "ambiguous CALL output gradient: CALL '{}' gets the buffer this AFTER returns as "
          "arguments {} and {}",
          name, outputs[0], k));
  return outputs[0];
}

// AFTER(t, deps...): t once the deps ran. A STORE that overwrites exactly t, or a kernel CALL that
// writes t as one of its outputs, gives the result its value (the last such dep wins); stores
// elsewhere and calls that only read t leave t's gradient path alone.
Value after_grad(const UOp& a, const UOp& g) {
  const UOp& t = a.src(0);
  std::vector<Value> out(a.nsrc());
  size_t route = 0;     // the source the gradient goes to: t, or the dep that wrote it
  int64_t output = -1;  // the routed CALL's output, -1 for a STORE (or none)
  for (size_t k = 1; k < a.nsrc(); ++k) {
    const UOp& dep = a.src(k);
    if (dep.op() == Op::Call) {
      if (auto i = call_output_for(dep, t)) {
        if (route != 0)
          throw EvalError(
              "ambiguous CALL output gradient: several deps of an AFTER write the "
              "buffer it returns");
        route = k;
        output = static_cast<int64_t>(*i);
      }
      continue;
    }
    if (dep.op() != Op::Store) continue;
    if (dep.src(0) == t) {
      route = k;
      output = -1;
    } else if (storage_root(dep.src(0)) == storage_root(t)) {
      throw EvalError(
          "gradient through an aliased write: a STORE writes part of (or another view of) the "
          "buffer this AFTER returns");
    }
  }
  out[route] = Value::uop(
      output >= 0 ? call_grad_bundle(call_outputs(a.src(route)), static_cast<size_t>(output), g)
                  : g);
  return Value::tuple(std::move(out));
}

// RETURNED(call): output i's gradient, bundled for the CALL.
Value returned_grad(const UOp& r, const UOp& g) {
  const UOp& call = r.src(0);
  return Value::tuple(
      {Value::uop(call_grad_bundle(call_outputs(call), static_cast<size_t>(r.arg().as_int()), g))});
}

const HelperRegistrar kReturnedGrad(
    {"returned_grad", 2, 2, Type::Tuple,
     [](RewriteContext&, std::span<const Value> a) {
       return returned_grad(a[0].as_uop(), a[1].as_uop());
     },
     "returned_grad(returned, g): output i's gradient as the CALL's bundle of output gradients"},
    {Type::UOp, Type::UOp});

const HelperRegistrar kAfterGrad({"after_grad", 2, 2, Type::Tuple,
                                  [](RewriteContext&, std::span<const Value> a) {
                                    return after_grad(a[0].as_uop(), a[1].as_uop());
                                  },
                                  "after_grad(after, g): the gradient of an AFTER per source (t, "
                                  "or the store or CALL writing it)"},
                                 {Type::UOp, Type::UOp});

}  // namespace
}  // namespace tinyrw::rw

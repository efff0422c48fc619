// Facts about CALLs and buffers for rules/call.rw and rules/gradient.rw: analyses and builders of
// ir/call.h and ir/builders.h, exposed to the rules. None of them is a rewrite: the rules decide.
#include <fmt/format.h>

#include "dsl/typed_helper.h"
#include "ir/builders.h"
#include "ir/call.h"

namespace tinyrw::rw {
namespace {

size_t count_arg(i128 v) {
  if (v < 0) throw EvalError(fmt::format("expected a count or index >= 0, got {}", to_string(v)));
  return static_cast<size_t>(v);
}

// Kept C++: binding PARAMs is a substitution over the whole body (not entering nested CALLs).
const HelperRegistrar kInlineOutput(typed_helper(
    "inline_output", +[](const UOp& c, i128 i) { return inline_output(c, count_arg(i)); }));

const HelperRegistrar kIsBufferView(typed_helper(
    "is_buffer_view", +[](const UOp& u) { return is_buffer_view(u); }));

// Kept C++: walks views and assignment chains of any length.
const HelperRegistrar kStorageRoot(typed_helper(
    "storage_root", +[](const UOp& u) { return storage_root(u); }));
// Kept C++: the access analysis reads the body's loads and stores (ir/call.h).
const HelperRegistrar kCallWrites(typed_helper(
    "call_writes", +[](const UOp& c) {
      std::vector<Value> out;
      for (size_t w : call_access(c).writes) out.push_back(Value::integer(static_cast<i128>(w)));
      return out;
    }));
const HelperRegistrar kCallOutputs(typed_helper(
    "call_outputs", +[](const UOp& c) { return static_cast<i128>(call_outputs(c)); }));
// Kept C++: the bundle's form is shared with the gradient pass, which adds bundles up.
const HelperRegistrar kCallGradBundle(typed_helper(
    "call_grad_bundle", +[](i128 n_outputs, i128 output, const UOp& g) {
      const size_t n = count_arg(n_outputs), i = count_arg(output);
      if (i >= n) throw EvalError(fmt::format("output {} of a CALL with {} outputs", i, n));
      return call_grad_bundle(n, i, g);
    }));

}  // namespace
}  // namespace tinyrw::rw

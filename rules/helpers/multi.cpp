// Graph builders for rules/multi.rw's allreduce: chains of copies across devices, which the rule
// language cannot build (a def does not loop, and fold takes an op). Which values, devices and
// order to use is the rules' decision.
#include <fmt/format.h>

#include "dsl/typed_helper.h"

namespace tinyrw::rw {
namespace {

UOp as_uop(const Value& v, const char* what) {
  if (!v.is_uop()) throw EvalError(fmt::format("{}: expected a UOp, got {}", what, v.repr()));
  return v.as_uop();
}

// ((v0 copied to v1's device) op v1, copied to v2's device) op v2 ...: a reduction that moves
// from device to device, as a ring's reduce-scatter does.
const HelperRegistrar kFoldAcross(typed_helper(
    "fold_across", +[](Op op, const std::vector<Value>& values) {
      if (values.empty()) throw EvalError("fold_across: no values");
      UOp acc = as_uop(values[0], "fold_across");
      for (size_t k = 1; k < values.size(); ++k) {
        const UOp v = as_uop(values[k], "fold_across");
        const UOp moved = UOp::make(Op::Copy, acc.dtype(), {acc}, v.device());
        acc = moved.alu(op, {v});
      }
      return acc;
    }));

// (v, v copied to d0, that copied to d1, ...): a value passed along devices, as a ring's allgather.
const HelperRegistrar kCopiesAlong(typed_helper(
    "copies_along", +[](const UOp& v, const std::vector<Value>& devices) {
      std::vector<Value> out{Value::uop(v)};
      UOp cur = v;
      for (const Value& d : devices) {
        if (d.kind() != Value::Kind::String)
          throw EvalError(fmt::format("copies_along: a device name, got {}", d.repr()));
        cur = UOp::make(Op::Copy, cur.dtype(), {cur}, Arg::string(d.as_string()));
        out.push_back(Value::uop(cur));
      }
      return out;
    }));

}  // namespace
}  // namespace tinyrw::rw

// Primitives of rules/symbolic.rw: the rewrites are rules there, over the analyses on UOp (ir/:
// terms.cpp, order.cpp, may_wrap and may_raise). All integer math is exact (Python floor semantics
// for // and %): a fold whose arithmetic would leave the exact 128-bit range, or use an unbounded
// (saturated) vmin/vmax, is not done.
#include "dsl/typed_helper.h"
#include "ir/alu.h"

namespace tinyrw::rw {
namespace {

// ---- registration
// Each helper's comment line says why it is C++.

// C++: exact constant folding with the dtype semantics of exec_alu (a primitive).
const HelperRegistrar kFoldConst(typed_helper(
    "fold_const", +[](const UOp& u) {
      std::vector<Arg> args;
      for (const UOp& s : u.src()) args.push_back(s.arg());
      const std::optional<Arg> r = exec_alu(u.op(), u.dtype(), args);
      return r ? u.const_like(*r) : UOp();
    }));

// C++: a primitive of checked arithmetic (floats follow IEEE, an infinity is a value; ints
// saturate at the 128-bit limits).
const HelperRegistrar kExact(typed_helper(
    "exact",
    +[](const Value& v) { return v.kind() == Value::Kind::Float || !is_infinite(v.as_int()); }));

// C++: a primitive of checked arithmetic.
const HelperRegistrar kFits(typed_helper(
    "fits", +[](const UOp& x, const Value& v) {
      if (v.kind() == Value::Kind::Float) return true;
      const DType d = x.dtype();
      const i128 i = v.as_int();
      if (is_infinite(i)) return false;
      return !d.is_int() || d.is_index() || (i >= d.int_min() && i <= d.int_max());
    }));

// tinygrad's Invalid: the index of a gated read where its valid fails (no .rw literal spells
// it). IR only, so `rwc prove` runs the index rules that build gates.
const HelperRegistrar kInvalid(typed_helper(
    "invalid", +[]() { return UOp::constant(dtypes::index, Arg::invalid()); }));

}  // namespace
}  // namespace tinyrw::rw

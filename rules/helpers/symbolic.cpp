// Primitives of rules/symbolic.rw: the rewrites are rules there, over the analyses on UOp (ir/:
// terms.cpp, order.cpp, may_wrap and may_raise), and the chain searches of combine_divmod_terms
// (which keep long sums fast). All integer math is exact (Python floor semantics
// for // and %): a fold whose arithmetic would leave the exact 128-bit range, or use an unbounded
// (saturated) vmin/vmax, is not done.
#include <algorithm>

#include "dsl/typed_helper.h"
#include "ir/alu.h"

namespace tinyrw::rw {
namespace {

// Calls f(term, k) for the terms of the chain of ADDs under top, top down (term k is the source of
// spine node k that is not node k+1; the last node is a term itself; rules/symbolic.rw's
// spine_terms says the same in the language).
template <class F>
void for_each_chain_term(const UOp& top, F&& f) {
  const std::vector<UOp> sp = top.spine(Op::Add, kMaxSpineNodes);
  for (size_t k = 0; k < sp.size(); ++k) {
    const bool last = k + 1 == sp.size();
    f(last ? sp[k] : sp[k].src(sp[k].src(0) == sp[k + 1] ? 1 : 0), static_cast<i128>(k));
  }
}

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

// C++: searches of a chain of ADDs (primitives, not rewrites): each Add of a long sum searches
// the other side's chain once, so they walk nodes without building values per term.
const HelperRegistrar kChainIndices(typed_helper(
    "chain_indices", +[](const UOp& top, const std::vector<Value>& ts) {
      std::vector<Value> out(ts.size(), Value::integer(-1));
      if (ts.empty()) return out;
      for_each_chain_term(top, [&](const UOp& u, i128 k) {
        for (size_t i = 0; i < ts.size(); ++i)
          if (ts[i].is_uop() && ts[i].as_uop() == u && out[i].as_int() < 0)
            out[i] = Value::integer(k);
      });
      return out;
    }));
const HelperRegistrar kChainMods(typed_helper(
    "chain_mods", +[](const UOp& top, const std::vector<Value>& nums) {
      std::vector<Value> out;
      auto in_nums = [&](const UOp& x) {
        return std::any_of(nums.begin(), nums.end(),
                           [&](const Value& n) { return n.is_uop() && n.as_uop() == x; });
      };
      if (nums.empty()) return out;
      for_each_chain_term(top, [&](const UOp& u, i128 k) {
        const bool mul = u.op() == Op::Mul && u.src(1).is_const() && u.src(1).arg().is_int();
        const UOp& m = mul ? u.src(0) : u;
        if (m.op() == Op::FloorMod &&
            (in_nums(m.src(0)) || (m.src(0).op() == Op::FloorDiv && in_nums(m.src(0).src(0)))))
          out.push_back(Value::tuple({Value::integer(k), Value::uop(u)}));
      });
      return out;
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

}  // namespace
}  // namespace tinyrw::rw

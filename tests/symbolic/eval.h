// Test support: evaluates an integer/boolean UOp graph with Python semantics (exact integers,
// floor // and %), reporting undefined results (division by zero).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "ir/uop.h"

namespace tinyrw::test {

inline std::optional<i128> py_eval(const UOp& e, const std::map<std::string, i128>& env) {
  std::map<const UOpNode*, i128> v;
  for (const UOp& u : toposort(e)) {
    auto s = [&](size_t i) { return v.at(u.src(i).node()); };
    i128 out = 0;
    switch (u.op()) {
      case Op::Const:
        out = u.arg().as_int();
        break;
      case Op::DefineVar:
        out = env.at(u.arg().items()[0].as_string());
        break;
      case Op::Add:
        out = s(0) + s(1);
        break;
      case Op::Sub:
        out = s(0) - s(1);
        break;
      case Op::Mul:
        out = s(0) * s(1);
        break;
      case Op::Neg:
        out = -s(0);
        break;
      case Op::Max:
        out = std::max(s(0), s(1));
        break;
      case Op::FloorDiv:
        if (s(1) == 0) return std::nullopt;
        out = floor_div(s(0), s(1));
        break;
      case Op::FloorMod:
        if (s(1) == 0) return std::nullopt;
        out = floor_mod(s(0), s(1));
        break;
      case Op::CmpLt:
        out = s(0) < s(1);
        break;
      case Op::CmpNe:
        out = s(0) != s(1);
        break;
      case Op::CmpEq:
        out = s(0) == s(1);
        break;
      case Op::And:
        out = s(0) & s(1);
        break;
      case Op::Or:
        out = s(0) | s(1);
        break;
      case Op::Xor:
        out = s(0) ^ s(1);
        break;
      case Op::Shl:
        out = s(0) * (static_cast<i128>(1) << static_cast<int>(s(1)));
        break;
      case Op::Shr:
        out = floor_div(s(0), static_cast<i128>(1) << static_cast<int>(s(1)));
        break;
      case Op::Where:
        out = s(0) ? s(1) : s(2);
        break;
      default:
        throw std::runtime_error("py_eval: unexpected op " + std::string(op_name(u.op())));
    }
    v[u.node()] = out;
  }
  return v.at(e.node());
}

}  // namespace tinyrw::test

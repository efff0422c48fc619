#include "ir/render.h"

#include <unordered_map>

#include <fmt/format.h>

#include "ir/graph.h"

namespace tinyrw {

namespace {

// Python precedence levels (higher binds tighter).
enum Prec : int {
  kCompare = 6,
  kBitOr = 7,
  kBitXor = 8,
  kBitAnd = 9,
  kShift = 10,
  kAdditive = 11,
  kMultiplicative = 12,
  kUnary = 13,
  kAtom = 20,
};

struct Text {
  std::string s;
  int prec;
};

struct BinarySyntax {
  const char* sym;
  int prec;
};

std::optional<BinarySyntax> binary_syntax(Op op) {
  switch (op) {
    case Op::Add: return BinarySyntax{"+", kAdditive};
    case Op::Sub: return BinarySyntax{"-", kAdditive};
    case Op::Mul: return BinarySyntax{"*", kMultiplicative};
    case Op::FloorDiv: return BinarySyntax{"//", kMultiplicative};
    case Op::FloorMod: return BinarySyntax{"%", kMultiplicative};
    case Op::CmpLt: return BinarySyntax{"<", kCompare};
    case Op::CmpNe: return BinarySyntax{"!=", kCompare};
    case Op::CmpEq: return BinarySyntax{"==", kCompare};
    case Op::And: return BinarySyntax{"&", kBitAnd};
    case Op::Or: return BinarySyntax{"|", kBitOr};
    case Op::Xor: return BinarySyntax{"^", kBitXor};
    case Op::Shl: return BinarySyntax{"<<", kShift};
    case Op::Shr: return BinarySyntax{">>", kShift};
    default: return std::nullopt;
  }
}

std::string paren(const Text& t, bool need) { return need ? "(" + t.s + ")" : t.s; }

Text render_const(const UOp& u) {
  const Arg& v = u.arg();
  if (v.is_bool()) return {v.as_bool() ? "True" : "False", kAtom};
  if (v.is_int()) return {to_string(v.as_int()), v.as_int() < 0 ? kUnary : kAtom};
  if (v.is_float()) {
    const std::string s = v.repr();
    if (s == "inf" || s == "-inf" || s == "nan") return {fmt::format("float('{}')", s), kAtom};
    return {s, s[0] == '-' ? kUnary : kAtom};
  }
  throw GraphError("cannot render constant " + v.repr() + " in Python syntax");
}

Text render_node(const UOp& u, const std::unordered_map<const UOpNode*, Text>& done) {
  auto sub = [&](size_t i) -> const Text& { return done.at(u.src(i).node()); };
  const Op op = u.op();
  if (auto b = binary_syntax(op)) {
    const Text& l = sub(0);
    const Text& r = sub(1);
    // Left-associative: an equal-precedence left operand needs no parentheses; comparisons chain
    // in Python, so a comparison operand of a comparison always gets them.
    const bool lp = l.prec < b->prec || (b->prec == kCompare && l.prec == kCompare);
    const bool rp = r.prec <= b->prec;
    return {paren(l, lp) + b->sym + paren(r, rp), b->prec};
  }
  switch (op) {
    case Op::Const: return render_const(u);
    case Op::DefineVar:
    case Op::Special: {
      const Arg& a = u.arg();
      return {a.is_tuple() ? a.items()[0].as_string() : a.as_string(), kAtom};
    }
    case Op::Range: return {"ridx" + to_string(u.arg().items()[0].as_int()), kAtom};
    case Op::Bind: return sub(0);
    case Op::Neg: return {"-" + paren(sub(0), sub(0).prec < kUnary), kUnary};
    case Op::Max: return {fmt::format("max({}, {})", sub(0).s, sub(1).s), kAtom};
    case Op::CDiv: return {fmt::format("cdiv({}, {})", sub(0).s, sub(1).s), kAtom};
    case Op::CMod: return {fmt::format("cmod({}, {})", sub(0).s, sub(1).s), kAtom};
    case Op::Where:
      return {fmt::format("({} if {} else {})", sub(1).s, sub(0).s, sub(2).s), kAtom};
    case Op::Cast: {
      const DType d = u.dtype();
      const char* fn = d.is_bool() ? "bool" : d.is_float() ? "float" : "int";
      return {fmt::format("{}({})", fn, sub(0).s), kAtom};
    }
    default:
      throw GraphError(fmt::format("cannot render {} in Python syntax", op_info(op).py_name));
  }
}

}  // namespace

std::string render(const UOp& expr) {
  std::unordered_map<const UOpNode*, Text> done;
  for (const UOp& u : toposort(expr)) done.emplace(u.node(), render_node(u, done));
  const Text& t = done.at(expr.node());
  // Like tinygrad, a binary expression at the top is wrapped once: ((x*2+1)%5).
  return t.prec < kUnary && binary_syntax(expr.op()) ? "(" + t.s + ")" : t.s;
}

}  // namespace tinyrw

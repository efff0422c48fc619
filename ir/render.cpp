#include "ir/render.h"

#include <optional>
#include <vector>

#include <fmt/format.h>

#include "ir/graph.h"
#include "ir/uop_node.h"

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

struct BinarySyntax {
  const char* sym;
  int prec;
};

std::optional<BinarySyntax> binary_syntax(Op op) {
  switch (op) {
    case Op::Add:
      return BinarySyntax{"+", kAdditive};
    case Op::Sub:
      return BinarySyntax{"-", kAdditive};
    case Op::Mul:
      return BinarySyntax{"*", kMultiplicative};
    case Op::FloorDiv:
      return BinarySyntax{"//", kMultiplicative};
    case Op::FloorMod:
      return BinarySyntax{"%", kMultiplicative};
    case Op::CmpLt:
      return BinarySyntax{"<", kCompare};
    case Op::CmpNe:
      return BinarySyntax{"!=", kCompare};
    case Op::CmpEq:
      return BinarySyntax{"==", kCompare};
    case Op::And:
      return BinarySyntax{"&", kBitAnd};
    case Op::Or:
      return BinarySyntax{"|", kBitOr};
    case Op::Xor:
      return BinarySyntax{"^", kBitXor};
    case Op::Shl:
      return BinarySyntax{"<<", kShift};
    case Op::Shr:
      return BinarySyntax{">>", kShift};
    default:
      return std::nullopt;
  }
}

// One piece of output: literal text, or a node's rendering (optionally parenthesized).
struct Piece {
  std::string_view text;
  const UOpNode* node = nullptr;
  bool paren = false;
};

// Renders in two passes so deep expressions cost linear time: first every node's precedence
// (and the text of leaves), then one iterative emission into a single string. Nodes are numbered
// in topological order (NodeSlots: the number sits in the node), and what the passes keep per
// node lives in arrays by that number: no hash map or allocation per node.
class PyRenderer {
 public:
  std::string run(const UOp& root) {
    nodes_ = toposort(root);
    slots_.emplace();  // after toposort's own numbering is gone: this walk may own the marks
    prec_.resize(nodes_.size());
    leaf_.resize(nodes_.size());
    for (uint32_t i = 0; i < nodes_.size(); ++i) {
      slots_->set(UOpAccess::node(nodes_[i]), i);
      prec_[i] = precedence(nodes_[i], i);
    }
    std::string out;
    std::vector<Piece> stack{{{}, root.node(), top_paren(root)}};
    std::vector<Piece> parts;
    while (!stack.empty()) {
      const Piece p = stack.back();
      stack.pop_back();
      if (!p.node) {
        out += p.text;
        continue;
      }
      if (p.paren) {
        stack.push_back({")"});
        stack.push_back({{}, p.node, false});
        stack.push_back({"("});
        continue;
      }
      parts.clear();
      expand(nodes_[number(p.node)], parts);
      stack.insert(stack.end(), parts.rbegin(), parts.rend());
    }
    return out;
  }

 private:
  // Like tinygrad, a binary expression at the top is wrapped once: ((x*2+1)%5).
  bool top_paren(const UOp& root) const { return binary_syntax(root.op()).has_value(); }

  // The node's number in this walk (every node the emission reaches was numbered).
  uint32_t number(const UOpNode* n) const { return slots_->find(n); }

  // u's precedence; a leaf's text goes to leaf_[i].
  int precedence(const UOp& u, uint32_t i) {
    if (auto b = binary_syntax(u.op())) return b->prec;
    switch (u.op()) {
      case Op::Const: {
        std::string t = const_text(u);
        const int p = t[0] == '-' ? kUnary : kAtom;
        leaf_[i] = std::move(t);
        return p;
      }
      case Op::DefineVar:
      case Op::Special: {
        const Arg& a = u.arg();
        leaf_[i] = a.is_tuple() ? a.items()[0].as_string() : a.as_string();
        return kAtom;
      }
      case Op::Range:
        leaf_[i] = range_label(u);
        return kAtom;
      case Op::Bind:
        return prec_of(u, 0);
      case Op::Neg:
        return kUnary;
      case Op::Max:
      case Op::CDiv:
      case Op::CMod:
      case Op::Where:
      case Op::Cast:
        return kAtom;
      default:
        throw GraphError(fmt::format("cannot render {} in Python syntax", op_info(u.op()).py_name));
    }
  }

  static std::string const_text(const UOp& u) {
    const Arg& v = u.arg();
    if (v.is_bool()) return v.as_bool() ? "True" : "False";
    if (v.is_int()) return to_string(v.as_int());
    if (v.is_float()) {
      const std::string s = v.repr();
      if (s == "inf" || s == "-inf" || s == "nan") return fmt::format("float('{}')", s);
      return s;
    }
    throw GraphError("cannot render constant " + v.repr() + " in Python syntax");
  }

  Piece child(const UOp& u, size_t i, bool paren) const { return {{}, u.src(i).node(), paren}; }
  int prec_of(const UOp& u, size_t i) const { return prec_[number(u.src(i).node())]; }

  // not(a < b) is a >= b, not(a != b) is a == b, not(a == b) is a != b.
  static std::optional<const char*> negated(const UOp& u) {
    if (u.op() != Op::CmpNe || !u.src(1).is_const() || !(u.src(1).arg() == Arg::boolean(true)))
      return std::nullopt;
    if (!u.src(0).src().empty() && u.src(0).src(0).dtype().is_bool())
      return std::nullopt;  // keep bool==bool explicit
    switch (u.src(0).op()) {
      case Op::CmpLt:
        return ">=";
      case Op::CmpNe:
        return "==";
      case Op::CmpEq:
        return "!=";
      default:
        return std::nullopt;
    }
  }

  void expand(const UOp& u, std::vector<Piece>& out) const {
    if (auto neg = negated(u)) {
      const UOp& cmp = u.src(0);
      out.push_back(child(cmp, 0, prec_of(cmp, 0) <= kCompare));
      out.push_back({*neg});
      out.push_back(child(cmp, 1, prec_of(cmp, 1) <= kCompare));
      return;
    }
    if (auto b = binary_syntax(u.op())) {
      const int l = prec_of(u, 0), r = prec_of(u, 1);
      // Left-associative: an equal-precedence left operand needs no parentheses; comparisons
      // chain in Python, so a comparison operand of a comparison always gets them.
      const bool lp = l < b->prec || (b->prec == kCompare && l == kCompare);
      out.push_back(child(u, 0, lp));
      out.push_back({b->sym});
      out.push_back(child(u, 1, r <= b->prec));
      return;
    }
    auto call = [&](std::string_view fn, std::initializer_list<size_t> args) {
      out.push_back({fn});
      bool first = true;
      for (size_t i : args) {
        if (!first) out.push_back({", "});
        first = false;
        out.push_back(child(u, i, false));
      }
      out.push_back({")"});
    };
    switch (u.op()) {
      case Op::Const:
      case Op::DefineVar:
      case Op::Special:
      case Op::Range:
        out.push_back({leaf_[number(u.node())]});
        return;
      case Op::Bind:
        out.push_back(child(u, 0, false));
        return;
      case Op::Neg:
        out.push_back({"-"});
        out.push_back(child(u, 0, prec_of(u, 0) < kUnary));
        return;
      case Op::Max:
        return call("max(", {0, 1});
      case Op::CDiv:
        return call("cdiv(", {0, 1});
      case Op::CMod:
        return call("cmod(", {0, 1});
      case Op::Cast: {
        const DType d = u.dtype();
        return call(d.is_bool() ? "bool(" : d.is_float() ? "float(" : "int(", {0});
      }
      case Op::Where:
        out.push_back({"("});
        out.push_back(child(u, 1, false));
        out.push_back({" if "});
        out.push_back(child(u, 0, false));
        out.push_back({" else "});
        out.push_back(child(u, 2, false));
        out.push_back({")"});
        return;
      default:
        throw GraphError(fmt::format("cannot render {}", op_info(u.op()).py_name));
    }
  }

  std::vector<UOp> nodes_;  // in topological order: a node's number is its position
  std::vector<int> prec_;
  std::vector<std::string> leaf_;  // a leaf's text ("" for other nodes)
  std::optional<NodeSlots> slots_;
};

}  // namespace

std::string render(const UOp& expr) { return PyRenderer().run(expr); }

}  // namespace tinyrw

// The canonical order of UOps (UOp::order): an analysis, not a rewrite. rules/symbolic.rw sorts
// the sources of commutative index ops by it (`x.src[1].precedes(x.src[0])`).
#include <algorithm>

#include "ir/uop.h"

namespace tinyrw {
namespace {

// ALU ops first (by op), then the irreducible ops (by op), constants last.
int rank(Op op) {
  if (op == Op::Const) return 3 * kNumOps;
  if (groups::irreducible().contains(op)) return 2 * kNumOps + static_cast<int>(op);
  return static_cast<int>(op);
}

template <class T>
int three_way(const T& a, const T& b) {
  return a < b ? -1 : b < a ? 1 : 0;
}

// Args by kind, then by value (tuples item by item, then by length); other kinds by their text.
int compare_args(const Arg& a, const Arg& b) {
  if (a.kind() != b.kind()) return a.kind() < b.kind() ? -1 : 1;
  switch (a.kind()) {
    case Arg::Kind::Int:
    case Arg::Kind::Bool:
      return three_way(a.as_int(), b.as_int());
    case Arg::Kind::Float:
      return three_way(a.as_float(), b.as_float());
    case Arg::Kind::String:
      return three_way(a.as_string(), b.as_string());
    case Arg::Kind::Tuple: {
      auto x = a.items(), y = b.items();
      for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
        if (int c = compare_args(x[i], y[i])) return c;
      return three_way(x.size(), y.size());
    }
    default:
      return three_way(a.repr(), b.repr());
  }
}

}  // namespace

int UOp::order(const UOp& o) const {
  std::vector<std::pair<const UOp*, const UOp*>> stack{{this, &o}};  // a and b keep both alive
  while (!stack.empty()) {
    auto [a, b] = stack.back();
    stack.pop_back();
    if (*a == *b) continue;
    if (int c = three_way(rank(a->op()), rank(b->op()))) return c;
    if (int c = compare_args(a->arg(), b->arg())) return c;
    if (a->dtype() != b->dtype()) return a->dtype().name() < b->dtype().name() ? -1 : 1;
    if (int c = three_way(a->nsrc(), b->nsrc())) return c;
    for (size_t i = a->nsrc(); i-- > 0;) stack.emplace_back(&a->src(i), &b->src(i));
  }
  return 0;
}

}  // namespace tinyrw

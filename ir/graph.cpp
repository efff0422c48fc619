#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>

#include "ir/uop_node.h"

namespace tinyrw {

std::vector<UOp> toposort(const UOp& root, const std::function<bool(const UOp&)>& enter,
                          bool enter_calls) {
  std::vector<UOp> out;
  if (!root) return out;
  NodeSlots visited;
  // Raw pointers are safe: root keeps every node below it alive for the whole walk.
  std::vector<std::pair<const UOp*, size_t>> stack;
  auto visit = [&](const UOp* u) {
    visited.set(UOpAccess::node(*u), 0);
    stack.emplace_back(u, enter && !enter(*u) ? u->nsrc() : 0);
  };
  visit(&root);
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->nsrc()) {
      const size_t i = next++;
      if (!enter_calls && i == 0 && node->op() == Op::Call) continue;
      const UOp* child = &node->src()[i];
      if (visited.find(child->node()) == NodeSlots::kNone) visit(child);
      continue;
    }
    out.push_back(*node);
    stack.pop_back();
  }
  return out;
}

bool may_raise(const UOp& root) {
  for (const UOp& u : toposort(root)) {
    switch (u.op()) {
      case Op::FloorDiv:
      case Op::FloorMod:
      case Op::CDiv:
      case Op::CMod:
        if (u.src(1).vmin().i <= 0 && u.src(1).vmax().i >= 0) return true;
        break;
      case Op::Shl:
      case Op::Shr:  // a shift amount out of [0, 127) is undefined (exec_alu)
        if (u.src(1).vmin().i < 0 || u.src(1).vmax().i >= 127) return true;
        break;
      case Op::Const:  // Invalid: no value (the false branch of a gated index)
        if (u.arg().is_invalid()) return true;
        break;
      default:
        break;
    }
  }
  return false;
}

std::vector<UOp> open_ranges(const UOp& root) {
  std::unordered_map<UOp, std::vector<UOp>> open;  // per node, in order of first use
  // an AFTER is a buffer ordered after effects, which close their ranges: it has none open (not
  // entered: what it orders may be whole earlier kernels)
  for (const UOp& u : toposort(root, [](const UOp& u) { return u.op() != Op::After; })) {
    if (u.op() == Op::After) {
      open.emplace(u, std::vector<UOp>{});
      continue;
    }
    std::vector<UOp> s;
    auto add = [&s](const UOp& r) {
      if (std::find(s.begin(), s.end(), r) == s.end()) s.push_back(r);
    };
    for (const UOp& src : u.src())
      for (const UOp& r : open.at(src)) add(r);
    if (u.op() == Op::Range) add(u);
    if (u.op() == Op::End || u.op() == Op::Reduce)
      for (size_t k = 1; k < u.nsrc(); ++k) std::erase(s, u.src(k));
    open.emplace(u, std::move(s));
  }
  return root ? open.at(root) : std::vector<UOp>{};
}

}  // namespace tinyrw

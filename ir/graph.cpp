#include "ir/graph.h"

#include <unordered_set>

namespace tinyrw {

std::vector<UOp> toposort(const UOp& root, const std::function<bool(const UOp&)>& enter,
                          bool enter_calls) {
  std::vector<UOp> out;
  if (!root) return out;
  std::unordered_set<const UOpNode*> visited;
  std::vector<std::pair<UOp, size_t>> stack;
  visited.insert(root.node());
  stack.emplace_back(root, enter && !enter(root) ? root.nsrc() : 0);
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node.nsrc()) {
      const size_t i = next++;
      if (!enter_calls && i == 0 && node.op() == Op::Call) continue;
      const UOp child = node.src(i);
      if (!visited.insert(child.node()).second) continue;
      stack.emplace_back(child, enter && !enter(child) ? child.nsrc() : 0);
      continue;
    }
    out.push_back(std::move(node));
    stack.pop_back();
  }
  return out;
}

}  // namespace tinyrw

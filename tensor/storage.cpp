#include "tensor/storage.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "dsl/typed_helper.h"
#include "ir/alu.h"
#include "ir/call.h"

namespace tinyrw {

void add_storages(std::vector<std::shared_ptr<Storage>>& to,
                  const std::vector<std::shared_ptr<Storage>>& from) {
  if (from.empty() || &to == &from) return;
  if (from.size() <= 8) {  // a few to look up: scanning `to` costs no more than a set of it
    for (const auto& s : from)
      if (std::find(to.begin(), to.end(), s) == to.end()) to.push_back(s);
    return;
  }
  std::unordered_set<const Storage*> have;
  have.reserve(to.size() + from.size());
  for (const auto& s : to) have.insert(s.get());
  for (const auto& s : from)
    if (have.insert(s.get()).second) to.push_back(s);
}

// ---- StorageList: a persistent set of buffers --------------------------------------------------

struct StorageList::Node {
  Items own;                   // a leaf's buffers, each once
  std::shared_ptr<Node> a, b;  // or the two lists merged here, until listed (then a leaf)
  ~Node();
};

// Releasing a long chain of merges one node at a time, off the C++ stack.
StorageList::Node::~Node() {
  static thread_local auto* pending = new std::vector<std::shared_ptr<Node>>();
  static thread_local bool draining = false;
  if (a) pending->push_back(std::move(a));
  if (b) pending->push_back(std::move(b));
  if (draining) return;
  draining = true;
  while (!pending->empty()) {
    std::shared_ptr<Node> n = std::move(pending->back());
    pending->pop_back();
    n.reset();  // may run ~Node again, which only queues
  }
  draining = false;
}

StorageList::StorageList(Items items) {
  if (items.empty()) return;
  node_ = std::make_shared<Node>();
  add_storages(node_->own, items);  // deduplicated
}

StorageList StorageList::merge(const StorageList& x, const StorageList& y) {
  if (y.empty() || x.node_ == y.node_) return x;
  if (x.empty()) return y;
  const Node &a = *x.node_, &b = *y.node_;
  // two small leaves: a leaf again, or one of them when it holds the other (the common case of
  // a graph over a few buffers allocates nothing)
  constexpr size_t kSmall = 16;
  if (!a.a && !b.a && a.own.size() + b.own.size() <= kSmall) {
    auto holds = [](const Items& big, const Items& small) {
      for (const auto& s : small)
        if (std::find(big.begin(), big.end(), s) == big.end()) return false;
      return true;
    };
    if (holds(a.own, b.own)) return x;
    if (holds(b.own, a.own)) return y;
    Items both = a.own;
    add_storages(both, b.own);
    return StorageList(std::move(both));
  }
  StorageList out;
  out.node_ = std::make_shared<Node>();
  out.node_->a = x.node_;
  out.node_->b = y.node_;
  return out;
}

const StorageList::Items& StorageList::items() const {
  static const Items kNone;
  if (!node_) return kNone;
  if (!node_->a) return node_->own;
  // every buffer under this node once, left before right, walking shared nodes once
  Items out;
  std::unordered_set<const Node*> visited;
  std::unordered_set<const Storage*> seen;
  std::vector<const Node*> stack{node_.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!visited.insert(n).second) continue;
    if (!n->a) {
      for (const auto& s : n->own)
        if (seen.insert(s.get()).second) out.push_back(s);
      continue;
    }
    stack.push_back(n->b.get());
    stack.push_back(n->a.get());
  }
  // The node becomes a leaf of its list and lets go of the merges under it (released through
  // ~Node's queue when nothing else holds them). Keeping them as well would hold one list per
  // listed step: a chain listed at every step (a loop calling storages() or gradient()) kept
  // n^2/2 buffer references alive.
  node_->own = std::move(out);
  const std::shared_ptr<Node> a = std::move(node_->a), b = std::move(node_->b);
  return node_->own;
}

int64_t next_effect_id() {
  static std::atomic<int64_t> next{1};
  return next++;
}

namespace {
// The counter is the front end's state, so the front end registers it (rules/schedule.rw).
const rw::HelperRegistrar kNextEffectId(rw::typed_helper(
    "next_effect_id", +[] { return i128{next_effect_id()}; }));
// A kernel CALL numbered as an effect: a new number for one that has none (0), else the CALL.
const rw::HelperRegistrar kNumberedCall(rw::typed_helper(
    "numbered_call", +[](const UOp& c) {
      CallInfo info = CallInfo::of(c);
      if (!info.kernel || info.id != 0) return c;
      info.id = next_effect_id();
      return UOp::make(Op::Call, c.dtype(), c.src(), info.to_arg());
    }));
}  // namespace

}  // namespace tinyrw

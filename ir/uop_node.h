// Internal layout of a UOp node. Only ir/ sources include this header.
#pragma once

#include <optional>

#include "ir/ptr_map.h"
#include "ir/uop.h"

namespace tinyrw {

// A node's side block (UOpNode::extra): its tag and its lazily computed properties. Allocated only
// for nodes made with a tag or whose properties were asked for.
struct Derived {
  Arg tag;
  bool has_range = false;
  bool has_shape = false;
  bool has_device = false;
  Num vmin, vmax;
  // a tensor int (not index) ALU node here, or one it is computed from, has an exact range beyond
  // its dtype: its value may have wrapped, so identities of exact integers may not hold for it
  bool may_wrap = false;
  std::optional<Shape> shape;
  std::string shape_error;  // set when the shape is invalid; rethrown on every request
  Arg device;
};

// Every side block by index (slot 0 unused); ir/uop.cpp owns it.
extern Derived** g_node_extras;
// A node's side block, or nullptr when it has none yet.
inline Derived* derived_of(const UOpNode* n) {
  return n->extra ? g_node_extras[n->extra] : nullptr;
}
// A node's side block, made on first use.
Derived& derive(UOpNode* n);
// A node's tag (None when it has none).
const Arg& node_tag(const UOpNode* n);

// Numbers the nodes a graph walk meets (node -> dense index into the walk's own arrays). The
// outermost walk keeps the number in the node itself, so finding it costs no hash lookup (on
// graphs of a million nodes, a hash map's random accesses dominated toposort and graph_rewrite);
// walks started while one is active (a rule's own graph_rewrite) use a hash map. Not thread-safe,
// like the hash-consing table.
class NodeSlots {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  NodeSlots();
  ~NodeSlots();
  NodeSlots(const NodeSlots&) = delete;
  NodeSlots& operator=(const NodeSlots&) = delete;

  // Whether this walk keeps its numbers in the nodes (the outermost walk) rather than a map.
  bool numbers_in_nodes() const { return epoch_ != 0; }
  uint32_t find(const UOpNode* n) const {
    if (epoch_) return n->walk_epoch == epoch_ ? n->walk_slot : kNone;
    const uint32_t* v = map_.find(n);
    return v ? *v : kNone;
  }
  void set(UOpNode* n, uint32_t slot) {
    if (epoch_) {
      n->walk_epoch = epoch_;
      n->walk_slot = slot;
    } else {
      *map_.try_emplace(n).first = slot;
    }
  }

 private:
  uint16_t epoch_ = 0;            // nonzero: this walk owns the nodes' marks
  mutable PtrMap<uint32_t> map_;  // find() is a lookup; PtrMap's find is not const
};

struct UOpAccess {
  static UOpNode* node(const UOp& u) { return u.n_; }
  static UOp borrow(UOpNode* n) { return UOp(n, false); }
};

}  // namespace tinyrw

// Internal layout of a UOp node. Only ir/ sources include this header.
#pragma once

#include <optional>

#include "ir/ptr_map.h"
#include "ir/uop.h"

namespace tinyrw {

// Lazily computed properties; allocated only for nodes whose properties were asked for.
struct Derived {
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

// A node's lazily derived properties (ir/uop.h declares UOpNode::derived).
inline Derived& derive(UOpNode* n) {
  if (!n->derived) n->derived = new Derived();
  return *n->derived;
}

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

  uint32_t find(const UOpNode* n) const {
    if (epoch_) return n->walk_mark == epoch_ ? n->walk_slot : kNone;
    const uint32_t* v = const_cast<PtrMap<uint32_t>&>(map_).find(n);
    return v ? *v : kNone;
  }
  void set(UOpNode* n, uint32_t slot) {
    if (epoch_) {
      n->walk_mark = epoch_;
      n->walk_slot = slot;
    } else {
      *map_.try_emplace(n).first = slot;
    }
  }

 private:
  uint32_t epoch_ = 0;  // nonzero: this walk owns the nodes' marks
  PtrMap<uint32_t> map_;
};

struct UOpAccess {
  static UOpNode* node(const UOp& u) { return u.n_; }
  static UOp borrow(UOpNode* n) { return UOp(n, false); }
};

}  // namespace tinyrw

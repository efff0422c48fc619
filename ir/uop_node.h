// Internal layout of a UOp node. Only ir/ sources include this header.
#pragma once

#include <optional>

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

class UOpNode {
 public:
  uint32_t refcount;
  uint32_t nsrc;
  uint32_t hash;
  Op op;
  DType dtype;
  Arg arg;
  Arg tag;
  UOpNode* next;  // chain of the hash-consing table's bucket
  Derived* derived;

  // The sources follow the node in the same allocation.
  UOp* srcs() { return reinterpret_cast<UOp*>(this + 1); }
  const UOp* srcs() const { return reinterpret_cast<const UOp*>(this + 1); }
  Derived& derive() {
    if (!derived) derived = new Derived();
    return *derived;
  }
};
static_assert(sizeof(UOpNode) % alignof(UOp) == 0);

struct UOpAccess {
  static UOpNode* node(const UOp& u) { return u.n_; }
  static UOp borrow(UOpNode* n) { return UOp(n, false); }
};

}  // namespace tinyrw

// Reverse-mode differentiation of UOp graphs (the rules of rules/gradient.rw), including CALLs:
// a function CALL is differentiated through its body (or its custom gradient), a kernel CALL
// through its gradient function.
#pragma once

#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/uop.h"
#include "tensor/tensor.h"

namespace tinyrw {

// The gradient of `root` (seeded with `root_grad`) for each target it depends on. `storages` are
// the buffers the graph reads (tensors handed to custom gradient functions carry them); the
// buffers custom gradient functions create are added to them, for the gradients to read.
std::unordered_map<UOp, UOp> compute_gradient(const UOp& root, const UOp& root_grad,
                                              const std::unordered_set<UOp>& targets,
                                              std::vector<std::shared_ptr<Storage>>& storages);

}  // namespace tinyrw

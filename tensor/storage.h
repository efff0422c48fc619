// The front end's bookkeeping over host buffers (runtime/storage.h): effect numbers, value checks
// for tensor creation, and merging the lists of buffers a graph reads.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "ir/arg.h"
#include "tensor/tensor.h"

namespace tinyrw {

// A fresh number for an event that writes buffers (an assignment's STORE, a kernel CALL): the
// schedule and the buffers' logs tell events apart by it, even when their graphs are equal.
int64_t next_effect_id();

// Refuses (TensorError) a value `dtype` cannot hold: an int out of range or a non-finite float for
// an int dtype, a finite float that overflows a float dtype. `what` and `element` (when >= 0) name
// the value in the message.
void check_fits(DType dtype, const Arg& v, std::string_view what, int64_t element = -1);

// Adds the storages of `from` that `to` does not hold yet (each buffer once: a graph that reuses
// a tensor, y * x + y, would otherwise double the list at every step). Linear in both sizes;
// tensors merge their lists with StorageList::merge, which is O(1).
void add_storages(std::vector<std::shared_ptr<Storage>>& to,
                  const std::vector<std::shared_ptr<Storage>>& from);

}  // namespace tinyrw

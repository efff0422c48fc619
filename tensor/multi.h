// Tensors over several devices, for realize(): rules/multi.rw's `multi` moves every UNSHARD to the
// top of the graphs asked for, each multi-device root becomes one root per device (`per_device`),
// which the one-device pipeline schedules, and the per-device results become the multi-device
// views the tensors hold: MSTACK(device views...), under UNSHARD(..., DEVICE range) when split.
#pragma once

#include <cstddef>
#include <vector>

#include "ir/uop.h"

namespace tinyrw {

// Whether a tensor graph holds a multi-device op (UNSHARD, MSTACK, MSELECT, ALLREDUCE, a COPY to
// several devices): only then do the multi rules run.
bool has_multi(const UOp& root);

// `u` after rules/multi.rw's `multi` (tinygrad's multi_pm): a split value is UNSHARD on top. A
// multi-device graph the rules refuse (a reshape that moves items between shards, ...) raises here.
UOp multi_normalized(const UOp& u);

// The multi-device value whose device k's part is parts[k]: MSTACK(parts...), under an UNSHARD
// with `split`'s arg and range when `split` (an UNSHARD) is given.
UOp stacked_parts(const std::vector<UOp>& parts, const UOp& split);

class DeviceSplit {
 public:
  // The one-device roots that compute `tensor_roots` (each one-device root as it is, each
  // multi-device one as one root per device, in device order).
  explicit DeviceSplit(const std::vector<UOp>& tensor_roots);
  const std::vector<UOp>& roots() const { return roots_; }
  // Each tensor root's view from the views of roots() (one per root).
  std::vector<UOp> join(const std::vector<UOp>& views) const;

 private:
  struct Group {
    size_t first = 0, count = 1;  // its roots in roots()
    bool multi = false;
    UOp unshard{};  // a split root's UNSHARD (its arg and range are the view's)
  };
  std::vector<UOp> roots_;
  std::vector<Group> groups_;
};

}  // namespace tinyrw

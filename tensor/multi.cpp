#include "tensor/multi.h"
#include "ir/graph.h"
#include "ir/rewrite.h"
#include "rules_gen/multi.h"
#include "schedule/rangeify.h"
#include "tensor/tensor.h"

namespace tinyrw {

bool has_multi(const UOp& root) {
  for (const UOp& u : toposort(root, nullptr, /*enter_calls=*/false))
    if (u.op() == Op::Unshard || u.op() == Op::MStack || u.op() == Op::MSelect ||
        u.op() == Op::AllReduce || (u.op() == Op::Copy && u.arg().is_tuple()))
      return true;
  return false;
}

UOp multi_normalized(const UOp& u) {
  return graph_rewrite(u, &rules::multi(), {.enter_calls = false, .name = "multi"});
}

DeviceSplit::DeviceSplit(const std::vector<UOp>& tensor_roots) {
  if (!has_multi(UOp::sink(tensor_roots))) {  // (one walk over all roots)
    roots_ = tensor_roots;
    for (size_t i = 0; i < roots_.size(); ++i) groups_.push_back({.first = i});
    return;
  }
  const UOp sink = multi_normalized(inline_calls(UOp::sink(tensor_roots)));
  std::vector<UOp> flat;
  for (const UOp& root : sink.src()) {
    Group g{.first = flat.size()};
    UOp value = root;
    if (value.op() == Op::Unshard) {
      g.unshard = value;
      value = value.src(0);
    }
    const Arg devices = value.device();
    if (!devices.is_tuple()) {
      if (g.unshard)
        throw TensorError("a split value that is on one device (UNSHARD needs several)");
      flat.push_back(value);
      groups_.push_back(g);
      continue;
    }
    g.multi = true;
    g.count = devices.items().size();
    for (size_t k = 0; k < g.count; ++k)
      flat.push_back(
          UOp::make(Op::MSelect, value.dtype(), {value}, Arg::integer(static_cast<int64_t>(k))));
    groups_.push_back(g);
  }
  // each device's part, MSELECT moved down to where the parts are made (pre-order)
  const UOp parts = graph_rewrite(UOp::sink(flat), &rules::per_device(),
                                  {.bottom_up = true, .enter_calls = false, .name = "per device"});
  roots_.assign(parts.src().begin(), parts.src().end());
}

UOp stacked_parts(const std::vector<UOp>& parts, const UOp& split) {
  const UOp stacked = UOp::make(Op::MStack, parts.at(0).dtype(), parts);
  if (!split) return stacked;
  std::vector<UOp> src{stacked};
  src.insert(src.end(), split.src().begin() + 1, split.src().end());
  return UOp::make(Op::Unshard, stacked.dtype(), src, split.arg());
}

std::vector<UOp> DeviceSplit::join(const std::vector<UOp>& views) const {
  std::vector<UOp> out;
  for (const Group& g : groups_) {
    if (!g.multi) {
      out.push_back(views.at(g.first));
      continue;
    }
    const std::vector<UOp> parts(views.begin() + static_cast<std::ptrdiff_t>(g.first),
                                 views.begin() + static_cast<std::ptrdiff_t>(g.first + g.count));
    out.push_back(stacked_parts(parts, g.unshard));
  }
  return out;
}

}  // namespace tinyrw

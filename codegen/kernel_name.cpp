#include "codegen/kernel_name.h"

#include <algorithm>
#include <tuple>

#include "ir/axis.h"
#include "ir/graph.h"

namespace tinyrw {

std::string kernel_name(const UOp& ast) {
  bool reduces = false;
  // (position, ids, size) of every range of bound > 1
  std::vector<std::tuple<int, std::vector<i128>, i128>> axes;
  for (const UOp& u : toposort(ast)) {
    if (u.op() == Op::Reduce) reduces = true;
    if (u.op() != Op::Range) continue;
    const i128 size = u.src(0).op() == Op::Const ? u.src(0).arg().as_int() : u.src(0).vmax().i;
    if (size <= 1) continue;
    const auto items = u.arg().items();
    std::vector<i128> ids;
    for (size_t k = 0; k + 1 < items.size(); ++k) ids.push_back(items[k].as_int());
    axes.emplace_back(axis_info(axis_type_of(u)).position.value_or(0), std::move(ids), size);
  }
  std::sort(axes.begin(), axes.end());
  std::string name = reduces ? "r" : "E";
  for (const auto& a : axes) name += "_" + to_string(std::get<2>(a));
  return name;
}

}  // namespace tinyrw

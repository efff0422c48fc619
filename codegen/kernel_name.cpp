#include "codegen/kernel_name.h"

#include <algorithm>
#include <tuple>

#include "ir/axis.h"
#include "ir/graph.h"
#include "ir/render.h"

namespace tinyrw {

std::string kernel_name(const UOp& ast) {
  bool reduces = false;
  // (position, ids, size) of every range of bound > 1; a symbolic bound is named by its expression
  std::vector<std::tuple<int, std::vector<i128>, std::string>> axes;
  for (const UOp& u : toposort(ast)) {
    if (u.op() == Op::Reduce) reduces = true;
    if (u.op() != Op::Range) continue;
    const UOp& bound = u.src(0);
    if (bound.op() == Op::Const && bound.arg().as_int() <= 1) continue;
    const auto items = u.arg().items();
    std::vector<i128> ids;
    for (size_t k = 0; k + 1 < items.size(); ++k) ids.push_back(items[k].as_int());
    axes.emplace_back(axis_info(axis_type_of(u)).position.value_or(0), std::move(ids),
                      bound.op() == Op::Const ? to_string(bound.arg().as_int()) : render(bound));
  }
  std::sort(axes.begin(), axes.end());
  std::string name = reduces ? "r" : "E";
  for (const auto& a : axes) name += "_" + std::get<2>(a);
  return name;
}

}  // namespace tinyrw

#include "codegen/target.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace tinyrw {

bool Target::renders(Op op, DType dtype) const {
  return std::none_of(decomposed.begin(), decomposed.end(), [&](const Decomposed& d) {
    return d.op == op && (d.dtypes.empty() || std::ranges::find(d.dtypes, dtype) != d.dtypes.end());
  });
}

const Target& Target::of(const std::string& device) {
  static const Target interp{.device = "INTERP", .decomposed = {}};
  static const Target cpu{
      .device = "CPU",
      .decomposed = {{Op::FloorDiv, {}}, {Op::FloorMod, {}}, {Op::Exp2, {}}, {Op::Log2, {}}},
  };
  if (device == "INTERP") return interp;
  if (device == "CPU") return cpu;
  throw std::invalid_argument(fmt::format("no codegen target for device '{}'", device));
}

}  // namespace tinyrw

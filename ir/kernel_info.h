// A kernel SINK's arg (tinygrad's KernelInfo): the kernel's name and what the optimizer decided
// or is to apply. Stored as Arg::record("KernelInfo", ...) with every field; a SINK whose arg is
// none reads as the defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/axis.h"
#include "ir/uop.h"

namespace tinyrw {

// What running the kernel costs: operations, bytes loaded from and stored to memory.
struct Estimates {
  int64_t ops = 0, lds = 0, mem = 0;
  bool operator==(const Estimates&) const = default;
};

struct KernelInfo {
  std::string name;  // filled by the optimizer (issue 15) or the custom kernel's author
  std::vector<AxisType> axis_types{};
  bool dont_use_locals = false;
  std::vector<Arg> applied_opts{};                  // the optimizations applied, in order
  std::optional<std::vector<Arg>> opts_to_apply{};  // none: the optimizer chooses
  std::optional<Estimates> estimates{};
  int64_t beam = 0;  // the beam search width asked for (0: none)
  Arg to_arg() const;
  static KernelInfo of(const UOp& sink);  // the SINK's arg, checked
  bool operator==(const KernelInfo&) const = default;
};

}  // namespace tinyrw

#include "runtime/device.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "runtime/storage.h"

namespace tinyrw {

namespace {
constexpr std::string_view kBases[] = {"INTERP", "CPU", "CUDA", "HIP"};
}  // namespace

std::string canonical_device(std::string_view name) {
  const size_t colon = name.find(':');
  std::string base(name.substr(0, colon));
  std::transform(base.begin(), base.end(), base.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (std::find(std::begin(kBases), std::end(kBases), base) == std::end(kBases))
    throw TensorError(fmt::format(
        "unknown device '{}' (INTERP, CPU, CUDA or HIP, optionally with an index: CPU:1)", name));
  if (colon == std::string_view::npos) return base;
  const std::string_view index = name.substr(colon + 1);
  const bool digits =
      !index.empty() && index.size() <= 9 &&
      std::all_of(index.begin(), index.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  if (!digits)
    throw TensorError(fmt::format(
        "device '{}': the index after ':' must be a non-negative number, as in {}:1", name, base));
  const int n = std::stoi(std::string(index));
  return n == 0 ? base : fmt::format("{}:{}", base, n);
}

std::string device_base(std::string_view canonical) {
  return std::string(canonical.substr(0, canonical.find(':')));
}

}  // namespace tinyrw

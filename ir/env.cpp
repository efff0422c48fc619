#include "ir/env.h"

#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

namespace tinyrw {

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0') throw std::invalid_argument(fmt::format("${}='{}' is not an integer", name, v));
  return n;
}

}  // namespace tinyrw

// Settings from the environment (tinygrad's getenv): one parser for every integer setting.
#pragma once

#include <cstdint>

namespace tinyrw {

// $name as an integer, `fallback` when unset or empty; throws std::invalid_argument naming the
// variable when it is set to something else than an integer.
int64_t env_int(const char* name, int64_t fallback);

}  // namespace tinyrw

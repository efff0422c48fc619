// Settings from the environment (tinygrad's getenv): one parser for every integer setting.
#pragma once

#include <cstdint>
#include <string>

namespace tinyrw {

// $name as an integer, `fallback` when unset or empty; throws std::invalid_argument naming the
// variable when it is set to something else than an integer.
int64_t env_int(const char* name, int64_t fallback);

// "NAME=value;..." for every setting env_int has been asked for so far, with its value now: what
// a cache of derived results (the schedule cache) keys on, so that a changed setting misses.
std::string env_signature();

}  // namespace tinyrw

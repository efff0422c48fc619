// Hash combining shared by the IR's and the rule language's hashes.
#pragma once

#include <cstddef>

namespace tinyrw {

// h with v mixed in (boost's hash_combine step): order-sensitive, so a sequence's hash is
// folded item by item.
inline size_t hash_mix(size_t h, size_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

}  // namespace tinyrw

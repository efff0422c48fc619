// Proofs that a kernel's memory accesses stay in their buffers, for the accesses whose interval
// bounds (vmin/vmax) are too wide to tell: index math a pool's gradient gives, with floor
// divisions and moduli the gate constrains. Z3 decides them over the integers (Python floor
// division and modulo, each RANGE and variable within its bounds); tinygrad validates its
// indices with Z3 the same way.
#pragma once

#include <cstdint>
#include <string>

#include "ir/uop.h"

namespace tinyrw {

enum class IndexProof { InBounds, OutOfBounds, Unknown };

struct IndexProofResult {
  IndexProof verdict = IndexProof::Unknown;
  std::string detail;  // a counterexample, or why nothing was proven
};

// Whether `index` lies in [0, size) wherever `gate` (may be null) holds. Unknown without Z3, on
// an op outside the integer and boolean fragment, or when the solver gives up.
IndexProofResult prove_index_in_bounds(const UOp& index, const UOp& gate, int64_t size);

}  // namespace tinyrw

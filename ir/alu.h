// Exact evaluation of ALU ops on constants, with the dtype's semantics: integers wrap to their
// width (index is exact), floats round to their precision, nan/inf propagate. The constant
// folder of the symbolic rules and the INTERP device both use it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ir/arg.h"

namespace tinyrw {

// nullopt when the result is undefined (integer division by zero, a shift out of range) or the
// op is not an ALU op.
std::optional<Arg> exec_alu(Op op, DType dtype, std::span<const Arg> srcs);

// A value converted to `dtype` as CAST does: ints wrap, floats round, bools are != 0; a non-finite
// float cast to an integer gives 0 (C leaves it undefined).
Arg cast_value(DType dtype, const Arg& v);

// ThreeFry's value: Threefry-2x32 of 20 rounds (Salmon et al., Random123), the generator tinygrad
// uses. The low and high 32 bits of `counter` are the counter words x0, x1, those of `key` the key
// words k0, k1; output word 0 is the result's low 32 bits, word 1 its high 32 bits. INTERP computes
// the op with it and Tensor::rand draws from it; exec_alu leaves ThreeFry alone, so constants of it
// never fold (as in tinygrad): CPU lowers it to 32-bit ops (rules/decompositions.rw).
uint64_t threefry2x32(uint64_t counter, uint64_t key);

}  // namespace tinyrw

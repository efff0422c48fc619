// Exact evaluation of ALU ops on constants, with the dtype's semantics: integers wrap to their
// width (index is exact), floats round to their precision, nan/inf propagate. The constant
// folder of the symbolic rules and the INTERP device both use it.
#pragma once

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

}  // namespace tinyrw

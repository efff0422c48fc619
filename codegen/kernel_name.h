// A kernel's name as tinygrad prints it: "r" when the kernel reduces, else "E", then "_size" for
// each RANGE of bound > 1, sorted by (axis type position, ids), e.g. r_16_32 for a row sum over
// (16, 32) and E_16_8 for an (8, 16) transpose before opts; after them (the name realize gives a
// kernel, codegen/linearize.h) the UPCAST and UNROLL ranges show too: E_16_2_4.
#pragma once

#include <string>

#include "ir/uop.h"

namespace tinyrw {

// `ast` is a kernel AST or part of one (its SINK, or an effect); a RANGE whose bound is not a CONST
// prints its bound's vmax.
std::string kernel_name(const UOp& ast);

}  // namespace tinyrw

// Renders integer/boolean expression graphs in Python syntax, e.g. ((x*2+1)%5), max(a, b),
// (a if c else b). Parentheses follow Python's precedence, so the text evaluates in Python to the
// graph's value (FLOORDIV is //, FLOORMOD is %). Ops without Python syntax raise GraphError.
#pragma once

#include <string>

#include "ir/uop.h"

namespace tinyrw {

std::string render(const UOp& expr);

}  // namespace tinyrw

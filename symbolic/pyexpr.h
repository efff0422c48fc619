// Parsing integer/boolean index expressions written in Python syntax into UOps: the input side
// of `rw simplify` (the output side is ir/render.h).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "ir/uop.h"

namespace tinyrw {

struct PyParseError {
  int col;  // 1-based column of the offending character
  std::string message;
};

// Variables by name (DEFINE_VAR UOps with their bounds).
using PyVars = std::map<std::string, UOp, std::less<>>;

// Parses one expression: integer literals, variables, + - * // % (floor semantics), comparisons
// (chains allowed), & | ^ << >>, unary -, max(a, b), min(a, b), (a if c else b), True, False.
// Integers become index UOps, comparisons and True/False bool UOps, built in tinygrad's forms
// (a - b is a + b*-1, a >= b is (a < b) != True).
std::optional<UOp> parse_python_expr(std::string_view text, const PyVars& vars,
                                     PyParseError& error);

}  // namespace tinyrw

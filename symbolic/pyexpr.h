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

// Parentheses, unary operators, max/min calls and `else` branches nest at most this deep; deeper
// input is an error naming the limit (the parser recurses once per level).
inline constexpr int kPyMaxNesting = 200;

// An expression has at most this many tokens (numbers, names, operators, parentheses); longer
// input is an error naming the limit. Simplifying costs time and memory about linear in the size:
// a sum of half a million terms takes seconds and under a gigabyte.
inline constexpr size_t kPyMaxTokens = 1000000;

// Variables by name (DEFINE_VAR UOps with their bounds).
using PyVars = std::map<std::string, UOp, std::less<>>;

// Parses one expression: integer literals, variables, + - * // % (floor semantics), comparisons
// (chains allowed), & | ^ << >>, unary -, max(a, b), min(a, b), (a if c else b), True, False.
// Integers become index UOps, comparisons and True/False bool UOps, built in tinygrad's forms
// (a - b is a + b*-1, a >= b is (a < b) != True).
std::optional<UOp> parse_python_expr(std::string_view text, const PyVars& vars,
                                     PyParseError& error);

}  // namespace tinyrw

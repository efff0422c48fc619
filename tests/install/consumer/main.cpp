// Uses the installed headers and library: builds a graph, rewrites it, renders the result.
#include <iostream>

#include "ir/render.h"
#include "ir/rewrite.h"
#include "ir/uop.h"

int main() {
  using namespace tinyrw;
  const UOp x = UOp::variable("x", 0, 10);
  const UOp y = UOp::variable("y", 0, 10);
  const UOp out = substitute((x * 2 + 1).floormod(5), {{x, y}});
  std::cout << render(out) << "\n";
  return render(out) == "((y*2+1)%5)" ? 0 : 1;
}

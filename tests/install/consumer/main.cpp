// Uses the installed headers and library: builds a graph, rewrites it, renders the result; runs a
// Tensor program through function() and its gradient.
#include <iostream>

#include "ir/render.h"
#include "ir/rewrite.h"
#include "ir/uop.h"
#include "tensor/function.h"
#include "tensor/tensor.h"

int main() {
  using namespace tinyrw;
  const UOp x = UOp::variable("x", 0, 10);
  const UOp y = UOp::variable("y", 0, 10);
  const UOp out = substitute((x * 2 + 1).floormod(5), {{x, y}});
  std::cout << render(out) << "\n";
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  auto square = function([](Tensor t) { return t * t; }, {.name = "square"});
  Tensor s = square(a).sum();
  const double value = s.item<float>();
  const std::vector<double> grad = s.gradient({a})[0].to_doubles();
  std::cout << "sum of squares " << value << ", gradient " << grad[0] << " " << grad[1] << " "
            << grad[2] << "\n";
  const bool ok =
      render(out) == "((y*2+1)%5)" && value == 14 && grad == std::vector<double>{2, 4, 6};
  return ok ? 0 : 1;
}

// Trains a small MLP (2 -> 16 -> 1, relu) by gradient descent to fit y = x0 * x1 on random
// points: each layer a function() (a CALL, inlined when realized), gradients from
// rules/gradient.rw through the calls, updates in place with assign(). Prints the loss.
#include <cstdio>
#include <random>

#include "tensor/function.h"
#include "tensor/tensor.h"

using namespace tinyrw;

int main() {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  auto matrix = [&](int64_t rows, int64_t cols, auto& dist) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float& e : v) e = dist(rng);
    return Tensor::from_vector(v, {rows, cols}).realize();
  };
  const int64_t n = 64;
  const Tensor x = matrix(n, 2, uniform);
  std::vector<float> xs = Tensor(x).data<float>(), ys;
  for (int64_t i = 0; i < n; ++i)
    ys.push_back(xs[static_cast<size_t>(2 * i)] * xs[static_cast<size_t>(2 * i + 1)]);
  const Tensor y = Tensor::from_vector(ys, {n, 1});
  Tensor w1 = matrix(2, 16, normal), b1 = matrix(1, 16, normal);
  Tensor w2 = matrix(16, 1, normal), b2 = matrix(1, 1, normal);
  const double lr = 0.1;
  auto linear =
      function([](Tensor in, Tensor w, Tensor b) { return in.matmul(w) + b; }, {.name = "linear"});
  for (int step = 0; step <= 200; ++step) {
    Tensor pred = linear(linear(x, w1, b1).relu(), w2, b2);
    Tensor loss = ((pred - y) * (pred - y)).mean();
    std::vector<Tensor> g = loss.gradient({w1, b1, w2, b2});
    if (step % 50 == 0) std::printf("step %3d  loss %.5f\n", step, loss.to_doubles()[0]);
    w1.assign(w1 - g[0] * lr);
    b1.assign(b1 - g[1] * lr);
    w2.assign(w2 - g[2] * lr);
    b2.assign(b2 - g[3] * lr);
    Tensor::realize_all({&w1, &b1, &w2, &b2});
  }
  std::printf("device %s\n", default_device().c_str());
}

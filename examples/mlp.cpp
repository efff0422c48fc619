// A small MLP forward pass with the Tensor API: 4 inputs -> 8 hidden (relu) -> 3 outputs.
// Realized on the default device (DEV=INTERP|CPU); prints the outputs and the kernel count.
#include <cstdio>
#include <random>

#include "tensor/tensor.h"

using namespace tinyrw;

int main() {
  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  auto random_matrix = [&](int64_t rows, int64_t cols) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float& x : v) x = normal(rng);
    return Tensor::from_vector(v, {rows, cols});
  };
  const Tensor x = Tensor::from_vector(std::vector<float>{0.5f, -1.0f, 2.0f, 0.25f,  //
                                                          1.0f, 0.0f, -0.5f, 3.0f},
                                       {2, 4});
  const Tensor w1 = random_matrix(4, 8), b1 = random_matrix(1, 8);
  const Tensor w2 = random_matrix(8, 3), b2 = random_matrix(1, 3);
  Tensor hidden = (x.matmul(w1) + b1).relu();
  Tensor out = hidden.matmul(w2) + b2;
  const std::vector<float> y = out.data<float>();
  std::printf("device %s, MLP 4 -> 8 -> 3 on a batch of 2 (%d kernels in the last realize)\n",
              default_device().c_str(), last_kernel_count());
  for (int r = 0; r < 2; ++r) {
    std::printf("  [%8.4f %8.4f %8.4f]\n", y[static_cast<size_t>(r * 3)],
                y[static_cast<size_t>(r * 3 + 1)], y[static_cast<size_t>(r * 3 + 2)]);
  }
  return 0;
}

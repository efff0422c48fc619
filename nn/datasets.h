// Datasets in the IDX format of MNIST and Fashion-MNIST (tinygrad's nn/datasets.py mnist()):
// gzip-compressed files of a big-endian header (magic, dimension sizes) and raw bytes.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace tinyrw::nn {

// A bad or missing file: the message names the file and the problem.
struct DatasetError : TensorError {
  using TensorError::TensorError;
};

// One .gz IDX file of unsigned bytes (magic 0x0801 labels, 0x0803 images) as a uint8 tensor of
// its dimensions.
Tensor load_idx(const std::string& path);

struct Mnist {
  Tensor x_train, y_train, x_test, y_test;  // images (N, 1, 28, 28) uint8, labels (N) uint8
};
// The four files of the set in `dir` (train-images-idx3-ubyte.gz, ...). A missing one names the
// Debian package that ships Fashion-MNIST (dataset-fashion-mnist).
Mnist load_mnist(const std::string& dir);
// Where Debian's dataset-fashion-mnist installs the files.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace tinyrw::nn

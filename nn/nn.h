// tinygrad's nn: layers that own their tensors, the tensors of a model by name (state dicts),
// optimizers (nn/optim.h) and safetensors files (nn/state.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tinyrw::nn {

// One tensor of a model under its dotted name ("l1.weight"); `trainable`: a parameter the
// optimizers update (running statistics are not).
struct NamedTensor {
  std::string name;
  Tensor* tensor;
  bool trainable = true;
};
using StateDict = std::vector<NamedTensor>;

// A model or layer: it lists the tensors it owns, and those of the modules it holds, in a fixed
// order (tinygrad finds them by walking attributes; C++ lists them).
class Module {
 public:
  virtual ~Module() = default;
  virtual void tensors(const std::string& prefix, StateDict& out) = 0;

 protected:
  static void add(StateDict& out, const std::string& prefix, const std::string& name, Tensor& t,
                  bool trainable = true) {
    out.push_back({prefix + name, &t, trainable});
  }
  static void add(StateDict& out, const std::string& prefix, const std::string& name, Module& m) {
    m.tensors(prefix + name + ".", out);
  }
};

StateDict get_state_dict(Module& m);             // every tensor, by name
std::vector<Tensor*> get_parameters(Module& m);  // the trainable ones
std::vector<Tensor*> get_buffers(Module& m);     // the others (running statistics)
// Assigns each named tensor of `state` to the model's tensor of that name (shapes must agree;
// dtypes are cast). strict: every model tensor must be in `state` and nothing else.
void load_state_dict(Module& m, const std::map<std::string, Tensor>& state, bool strict = true);

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor operator()(const Tensor& x) const;
  void tensors(const std::string& prefix, StateDict& out) override;
  Tensor weight;  // (out, in)
  std::optional<Tensor> bias;
};

class Conv2d : public Module {
 public:
  // kernel_size: one value for every spatial axis, or one each
  Conv2d(int64_t in_channels, int64_t out_channels, Dims kernel_size, ConvOptions options = {},
         bool bias = true);
  Tensor operator()(const Tensor& x) const;
  void tensors(const std::string& prefix, StateDict& out) override;
  ConvOptions options;
  Tensor weight;  // (out, in / groups, *kernel)
  std::optional<Tensor> bias;
};

// Batch normalization over axis 1 (tinygrad's BatchNorm, BatchNorm2d): in training it normalizes
// by the batch's statistics and moves the running ones toward them; otherwise it uses the
// running ones.
class BatchNorm : public Module {
 public:
  explicit BatchNorm(int64_t size, double eps = 1e-5, bool affine = true,
                     bool track_running_stats = true, double momentum = 0.1);
  Tensor operator()(const Tensor& x);
  void tensors(const std::string& prefix, StateDict& out) override;
  double eps, momentum;
  bool track_running_stats;
  std::optional<Tensor> weight, bias;
  Tensor running_mean, running_var, num_batches_tracked;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Dims normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor operator()(const Tensor& x) const;
  void tensors(const std::string& prefix, StateDict& out) override;
  Dims normalized_shape;
  double eps;
  std::optional<Tensor> weight, bias;
};

class Embedding : public Module {
 public:
  Embedding(int64_t vocab_size, int64_t embed_size);
  Tensor operator()(const Tensor& idx) const;  // integer indices -> their rows of weight
  void tensors(const std::string& prefix, StateDict& out) override;
  Tensor weight;  // (vocab, embed)
};

}  // namespace tinyrw::nn

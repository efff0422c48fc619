#include "nn/nn.h"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tinyrw::nn {

namespace {
// A parameter's initial value, realized: the optimizers assign to it.
Tensor initial(Tensor t) { return t.realize(); }
double product(const Dims& d) {
  double n = 1;
  for (int64_t v : d) n *= static_cast<double>(v);
  return n;
}
}  // namespace

StateDict get_state_dict(Module& m) {
  StateDict out;
  m.tensors("", out);
  return out;
}

std::vector<Tensor*> get_parameters(Module& m) {
  std::vector<Tensor*> out;
  for (const NamedTensor& t : get_state_dict(m))
    if (t.trainable) out.push_back(t.tensor);
  return out;
}

std::vector<Tensor*> get_buffers(Module& m) {
  std::vector<Tensor*> out;
  for (const NamedTensor& t : get_state_dict(m))
    if (!t.trainable) out.push_back(t.tensor);
  return out;
}

void load_state_dict(Module& m, const std::map<std::string, Tensor>& state, bool strict) {
  // every name and shape checked before anything is assigned: a refused load changes nothing
  std::set<std::string> used;
  std::vector<std::pair<Tensor*, const Tensor*>> pairs;
  for (const NamedTensor& t : get_state_dict(m)) {
    const auto it = state.find(t.name);
    if (it == state.end()) {
      if (strict) throw TensorError(fmt::format("load_state_dict: no tensor named '{}'", t.name));
      continue;
    }
    if (it->second.shape() != t.tensor->shape())
      throw TensorError(fmt::format("load_state_dict: '{}' has shape ({}), the model's ({})",
                                    t.name, fmt::join(it->second.shape(), ", "),
                                    fmt::join(t.tensor->shape(), ", ")));
    used.insert(t.name);
    pairs.emplace_back(t.tensor, &it->second);
  }
  if (strict)
    for (const auto& [name, t] : state)
      if (!used.count(name))
        throw TensorError(fmt::format("load_state_dict: the model has no tensor named '{}'", name));
  std::vector<Tensor*> loaded;
  for (const auto& [mine, theirs] : pairs) {
    mine->assign(theirs->cast(mine->dtype()));
    loaded.push_back(mine);
  }
  Tensor::realize_all(loaded);
}

// ---- Linear ------------------------------------------------------------------------------------

Linear::Linear(int64_t in, int64_t out, bool with_bias)
    : weight(initial(
          Tensor::uniform({out, in}, -1 / std::sqrt(double(in)), 1 / std::sqrt(double(in))))) {
  const double bound = 1 / std::sqrt(static_cast<double>(in));
  if (with_bias) bias = initial(Tensor::uniform({out}, -bound, bound));
}

Tensor Linear::operator()(const Tensor& x) const {
  // any leading axes: (..., in) as rows of a matrix
  const Dims s = x.shape();
  if (s.empty() || s.back() != weight.shape()[1])
    throw TensorError(fmt::format("Linear: input of shape ({}) for {} input features",
                                  fmt::join(s, ", "), weight.shape()[1]));
  Dims out = s;
  out.back() = weight.shape()[0];
  Tensor y = x.reshape({-1, s.back()}).matmul(weight.transpose()).reshape(out);
  return bias ? y + *bias : y;
}

void Linear::tensors(const std::string& prefix, StateDict& out) {
  add(out, prefix, "weight", weight);
  if (bias) add(out, prefix, "bias", *bias);
}

// ---- Conv2d ------------------------------------------------------------------------------------

namespace {
Dims kernel_dims(Dims k) { return k.size() == 1 ? Dims{k[0], k[0]} : k; }
double conv_scale(int64_t in, const Dims& k) {
  return 1 / std::sqrt(static_cast<double>(in) * product(kernel_dims(k)));
}
Dims conv_weight_shape(int64_t in, int64_t out, const Dims& k, int64_t groups) {
  if (groups < 1 || in % groups != 0)
    throw TensorError(
        fmt::format("Conv2d: {} input channels do not split into {} groups", in, groups));
  Dims s{out, in / groups};
  for (int64_t v : kernel_dims(k)) s.push_back(v);
  return s;
}
}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Dims k, ConvOptions o, bool with_bias)
    : options(std::move(o)),
      weight(initial(Tensor::uniform(conv_weight_shape(in, out, k, options.groups),
                                     -conv_scale(in, k), conv_scale(in, k)))) {
  if (with_bias) bias = initial(Tensor::uniform({out}, -conv_scale(in, k), conv_scale(in, k)));
}

Tensor Conv2d::operator()(const Tensor& x) const {
  return x.conv2d(weight, bias ? &*bias : nullptr, options);
}

void Conv2d::tensors(const std::string& prefix, StateDict& out) {
  add(out, prefix, "weight", weight);
  if (bias) add(out, prefix, "bias", *bias);
}

// ---- BatchNorm ---------------------------------------------------------------------------------

BatchNorm::BatchNorm(int64_t size, double eps_, bool affine, bool track, double momentum_)
    : eps(eps_),
      momentum(momentum_),
      track_running_stats(track),
      running_mean(initial(Tensor::zeros({size}))),
      running_var(initial(Tensor::ones({size}))),
      num_batches_tracked(initial(Tensor::zeros({}, dtypes::int64))) {
  if (affine) {
    weight = initial(Tensor::ones({size}));
    bias = initial(Tensor::zeros({size}));
  }
}

Tensor BatchNorm::operator()(const Tensor& x) {
  if (x.ndim() < 2) throw TensorError("BatchNorm needs an input of at least 2 axes (N, C, ...)");
  Dims per_channel(x.ndim(), 1);
  per_channel[1] = -1;
  std::vector<int> axes;
  for (int a = 0; a < static_cast<int>(x.ndim()); ++a)
    if (a != 1) axes.push_back(a);
  Tensor mean = running_mean, var = running_var;
  if (Tensor::training() || !track_running_stats) {
    mean = x.mean(axes);
    const Tensor y = x - mean.detach().reshape(per_channel);  // d(var)/d(mean) = 0
    var = (y * y).mean(axes);
    if (track_running_stats && Tensor::training()) {
      const double n = static_cast<double>(x.numel()), c = static_cast<double>(x.shape()[1]);
      if (n == c)
        throw TensorError(
            "BatchNorm: one value per channel in training has no unbiased variance (tinygrad "
            "raises ZeroDivisionError)");
      running_mean.assign(running_mean * (1 - momentum) + mean.detach() * momentum);
      // the running variance is unbiased
      running_var.assign(running_var * (1 - momentum) + var.detach() * (momentum * n / (n - c)));
      num_batches_tracked.assign(num_batches_tracked + 1.0);
    }
  }
  return x.batchnorm(weight ? &*weight : nullptr, bias ? &*bias : nullptr, mean,
                     (var + eps).rsqrt());
}

void BatchNorm::tensors(const std::string& prefix, StateDict& out) {
  if (weight) add(out, prefix, "weight", *weight);
  if (bias) add(out, prefix, "bias", *bias);
  if (track_running_stats) {
    add(out, prefix, "running_mean", running_mean, false);
    add(out, prefix, "running_var", running_var, false);
  }
  add(out, prefix, "num_batches_tracked", num_batches_tracked, false);
}

// ---- LayerNorm ---------------------------------------------------------------------------------

LayerNorm::LayerNorm(Dims shape, double eps_, bool affine)
    : normalized_shape(std::move(shape)), eps(eps_) {
  if (affine) {
    weight = initial(Tensor::ones(normalized_shape));
    bias = initial(Tensor::zeros(normalized_shape));
  }
}

Tensor LayerNorm::operator()(const Tensor& x) const {
  const Dims s = x.shape();
  const size_t n = normalized_shape.size();
  if (s.size() < n || !std::equal(normalized_shape.begin(), normalized_shape.end(), s.end() - n))
    throw TensorError(fmt::format("LayerNorm: the last axes of ({}) must be ({})",
                                  fmt::join(s, ", "), fmt::join(normalized_shape, ", ")));
  std::vector<int> axes;
  for (size_t i = 0; i < n; ++i) axes.push_back(-1 - static_cast<int>(i));
  const Tensor y = x.layernorm(axes, eps);
  return weight ? y * *weight + *bias : y;
}

void LayerNorm::tensors(const std::string& prefix, StateDict& out) {
  if (weight) add(out, prefix, "weight", *weight);
  if (bias) add(out, prefix, "bias", *bias);
}

// ---- Embedding ---------------------------------------------------------------------------------

Embedding::Embedding(int64_t vocab, int64_t embed)
    : weight(initial(Tensor::glorot_uniform({vocab, embed}))) {}

Tensor Embedding::operator()(const Tensor& idx) const {
  if (!idx.dtype().is_int())
    throw TensorError(
        fmt::format("Embedding: indices must be integers, got {}", idx.dtype().name()));
  // one-hot rows, as tinygrad's: an index outside [0, vocab) gives a row of zeros
  const int64_t vocab = weight.shape()[0];
  const Tensor hot = idx.unsqueeze(-1).eq(Tensor::arange(vocab)).unsqueeze(-1);
  return hot.where(weight, Tensor::zeros({}, weight.dtype())).sum({-2}).cast(weight.dtype());
}

void Embedding::tensors(const std::string& prefix, StateDict& out) {
  add(out, prefix, "weight", weight);
}

}  // namespace tinyrw::nn

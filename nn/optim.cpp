#include "nn/optim.h"

#include <algorithm>

#include <fmt/format.h>

namespace tinyrw::nn {

Optimizer::Optimizer(std::vector<Tensor*> params, double lr)
    : params_(std::move(params)), lr_(Tensor::full({1}, 0).realize()) {
  if (params_.empty()) throw TensorError("an optimizer needs at least one parameter");
  for (size_t i = 0; i < params_.size(); ++i)
    if (!params_[i]) throw TensorError(fmt::format("optimizer: parameter {} is null", i));
  // a tensor listed twice (a layer shared by two parts of a model) is updated once, as tinygrad's
  // dedup does
  std::vector<Tensor*> unique;
  for (Tensor* p : params_)
    if (std::find(unique.begin(), unique.end(), p) == unique.end()) unique.push_back(p);
  params_ = std::move(unique);
  set_lr(lr);
}

void Optimizer::set_lr(double lr) {
  if (!(lr >= 0)) throw TensorError(fmt::format("invalid learning rate {}", lr));
  // from host memory, not a constant: a constant would be compiled into the kernel that writes
  // it, a new kernel for every value (a schedule changing the rate each step compiled each step)
  lr_.assign(Tensor::from_vector(std::vector<float>{static_cast<float>(lr)}, {1}));
  lr_.realize();
}

void Optimizer::zero_grad() {
  for (Tensor* p : params_) p->clear_grad();
}

std::vector<Tensor> Optimizer::zeros_like(const std::vector<Tensor*>& params) {
  std::vector<Tensor> out;
  for (const Tensor* p : params) out.push_back(Tensor::zeros(p->shape()).realize());
  return out;
}

void Optimizer::step(const std::vector<Tensor*>& also) {
  if (!Tensor::training())
    throw TensorError("optimizer step outside training: call Tensor::set_training(true) first");
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i]->grad())
      throw TensorError(fmt::format(
          "optimizer step: parameter {} has no gradient (call backward() with it first)", i));
    grads.push_back(*params_[i]->grad());
  }
  const std::vector<Tensor> up = updates(grads);
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i]->assign((params_[i]->detach() - up[i]).cast(params_[i]->dtype()));
  std::vector<Tensor*> all = params_;
  for (Tensor* s : state()) all.push_back(s);
  for (Tensor* t : also) {
    if (!t) throw TensorError("optimizer step: a null tensor to realize with the step");
    all.push_back(t);
  }
  Tensor::realize_all(all);
}

SGD::SGD(std::vector<Tensor*> params, double lr, double momentum, double weight_decay,
         bool nesterov)
    : Optimizer(std::move(params), lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {
  if (momentum < 0) throw TensorError(fmt::format("SGD: invalid momentum {}", momentum));
  if (weight_decay < 0)
    throw TensorError(fmt::format("SGD: invalid weight_decay {}", weight_decay));
  if (momentum > 0) b_ = zeros_like(params_);
}

std::vector<Tensor> SGD::updates(const std::vector<Tensor>& grads) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < grads.size(); ++i) {
    Tensor g = grads[i].cast(dtypes::float32);
    if (weight_decay_ > 0) g = g + params_[i]->detach() * weight_decay_;
    if (momentum_ > 0) {
      b_[i].assign(b_[i] * momentum_ + g);  // zero before the first step
      g = nesterov_ ? g + b_[i] * momentum_ : b_[i];
    }
    out.push_back(g * lr_);
  }
  return out;
}

std::vector<Tensor*> SGD::state() {
  std::vector<Tensor*> out;
  for (Tensor& b : b_) out.push_back(&b);
  return out;
}

AdamW::AdamW(std::vector<Tensor*> params, double lr, double b1, double b2, double eps,
             double weight_decay)
    : Optimizer(std::move(params), lr),
      b1_(b1),
      b2_(b2),
      eps_(eps),
      weight_decay_(weight_decay),
      b1_t_(Tensor::ones({1}).realize()),
      b2_t_(Tensor::ones({1}).realize()),
      m_(zeros_like(params_)),
      v_(zeros_like(params_)) {
  if (weight_decay < 0)
    throw TensorError(fmt::format("AdamW: invalid weight_decay {}", weight_decay));
}

std::vector<Tensor> AdamW::updates(const std::vector<Tensor>& grads) {
  b1_t_.assign(b1_t_ * b1_);
  b2_t_.assign(b2_t_ * b2_);
  std::vector<Tensor> out;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor g = grads[i].cast(dtypes::float32);
    m_[i].assign(m_[i] * b1_ + g * (1 - b1_));
    v_[i].assign(v_[i] * b2_ + g * g * (1 - b2_));
    const Tensor m_hat = m_[i] / (-b1_t_ + 1.0), v_hat = v_[i] / (-b2_t_ + 1.0);
    const Tensor up = m_hat / (v_hat.sqrt() + eps_) + params_[i]->detach() * weight_decay_;
    out.push_back(up * lr_);
  }
  return out;
}

std::vector<Tensor*> AdamW::state() {
  std::vector<Tensor*> out{&b1_t_, &b2_t_};
  for (Tensor& m : m_) out.push_back(&m);
  for (Tensor& v : v_) out.push_back(&v);
  return out;
}

}  // namespace tinyrw::nn

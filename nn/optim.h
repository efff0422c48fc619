// tinygrad's optimizers (nn/optim.py): each step updates every parameter from its grad()
// (backward()) and realizes the new values and the optimizer's state in one schedule.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace tinyrw::nn {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor*> params, double lr);
  virtual ~Optimizer() = default;
  void zero_grad();
  // Training mode only (Tensor::set_training), as tinygrad's: each parameter needs a gradient.
  // `also` is realized in the same schedule: the loss, whose graph reads the parameters before
  // the update overwrites them, and a BatchNorm's running statistics (get_buffers); tinygrad's
  // loss.realize(*opt.schedule_step()).
  void step(const std::vector<Tensor*>& also = {});
  // The learning rate is a tensor, so changing it recompiles nothing.
  void set_lr(double lr);
  double lr() { return lr_.item<float>(); }

 protected:
  // What each parameter loses this step (params[i] - update[i]); the state is assigned here.
  virtual std::vector<Tensor> updates(const std::vector<Tensor>& grads) = 0;
  virtual std::vector<Tensor*> state() = 0;  // realized with the parameters
  static std::vector<Tensor> zeros_like(const std::vector<Tensor*>& params);
  std::vector<Tensor*> params_;
  Tensor lr_;  // float32 (1)
};

// Stochastic gradient descent: g = grad + weight_decay * p; with momentum, b = momentum * b + g
// and g = b (nesterov: g + momentum * b); p -= lr * g.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor*> params, double lr = 0.001, double momentum = 0, double weight_decay = 0,
      bool nesterov = false);

 protected:
  std::vector<Tensor> updates(const std::vector<Tensor>& grads) override;
  std::vector<Tensor*> state() override;

 private:
  double momentum_, weight_decay_;
  bool nesterov_;
  std::vector<Tensor> b_;
};

// Adam with decoupled weight decay (tinygrad's LAMB with the trust ratio 1): m and v the moving
// averages of g and g^2, m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t),
// p -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p). Adam is AdamW without decay.
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor*> params, double lr = 0.001, double b1 = 0.9, double b2 = 0.999,
        double eps = 1e-8, double weight_decay = 0.01);

 protected:
  std::vector<Tensor> updates(const std::vector<Tensor>& grads) override;
  std::vector<Tensor*> state() override;

 private:
  double b1_, b2_, eps_, weight_decay_;
  Tensor b1_t_, b2_t_;  // b1^t and b2^t
  std::vector<Tensor> m_, v_;
};

class Adam : public AdamW {
 public:
  Adam(std::vector<Tensor*> params, double lr = 0.001, double b1 = 0.9, double b2 = 0.999,
       double eps = 1e-8)
      : AdamW(std::move(params), lr, b1, b2, eps, 0) {}
};

}  // namespace tinyrw::nn

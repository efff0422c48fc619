// The main job: tinygrad's beautiful_mnist CNN trained on Fashion-MNIST (Debian's
// dataset-fashion-mnist), then its test accuracy, and its weights saved as safetensors.
//
//   fashion_mnist [--data DIR] [--steps N] [--bs N] [--lr X] [--seed N] [--out FILE]
//   fashion_mnist --load FILE [--data DIR]     evaluate saved weights only
//
// Batches are drawn at random from the training set on the host (a data loader's job) and the
// whole step (forward, backward, Adam update, BatchNorm statistics) is realized as one schedule.
// The learning rate falls linearly from --lr to a tenth of it over the steps.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "nn/datasets.h"
#include "nn/nn.h"
#include "nn/optim.h"
#include "nn/state.h"

using namespace tinyrw;

namespace {

struct Model : nn::Module {
  nn::Conv2d c1{1, 32, {5}}, c2{32, 32, {5}};
  nn::BatchNorm bn1{32};
  nn::Conv2d c3{32, 64, {3}}, c4{64, 64, {3}};
  nn::BatchNorm bn2{64};
  nn::Linear out{576, 10};
  void tensors(const std::string& p, nn::StateDict& o) override {
    add(o, p, "c1", c1);
    add(o, p, "c2", c2);
    add(o, p, "bn1", bn1);
    add(o, p, "c3", c3);
    add(o, p, "c4", c4);
    add(o, p, "bn2", bn2);
    add(o, p, "out", out);
  }
  Tensor operator()(const Tensor& x) {
    Tensor h = bn1(c2(c1(x).relu()).relu()).max_pool2d();
    h = bn2(c4(c3(h).relu()).relu()).max_pool2d();
    return out(h.reshape({h.shape()[0], -1}));
  }
};

struct Options {
  std::string data = nn::kFashionMnistDir, out = "fashion_mnist.safetensors", load;
  // ~37 s on 2 cores here, test accuracy 0.86 (issue 20: >= 0.85 within 2 minutes); 250 steps
  // gave 0.836-0.855 over three seeds
  int steps = 320, bs = 64;
  double lr = 2e-3;  // the first step's; it falls linearly to a tenth of it
  uint64_t seed = 1337;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "fashion_mnist: %s\nusage: fashion_mnist [--data DIR] [--steps N] [--bs N] [--lr X] "
               "[--seed N] [--out FILE] | --load FILE [--data DIR]\n",
               why.c_str());
  std::exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("'" + a + "' needs a value");
    const std::string v = argv[++i];
    auto number = [&](double lo) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (!end || *end || !(x >= lo)) usage("'" + v + "' is not a valid " + a);
      return x;
    };
    if (a == "--data")
      o.data = v;
    else if (a == "--out")
      o.out = v;
    else if (a == "--load")
      o.load = v;
    else if (a == "--steps")
      o.steps = static_cast<int>(number(1));
    else if (a == "--bs")
      o.bs = static_cast<int>(number(1));
    else if (a == "--lr")
      o.lr = number(0);
    else if (a == "--seed")
      o.seed = static_cast<uint64_t>(number(0));
    else
      usage("unknown option '" + a + "'");
  }
  return o;
}

// A progress bar on a terminal, plain lines otherwise.
class Progress {
 public:
  explicit Progress(int total) : total_(total), tty_(isatty(STDOUT_FILENO)) {}
  void update(int step, double loss, double images_per_s, double eta_s) {
    if (tty_) {
      const int width = 30, done = width * step / total_;
      std::printf("\r[%s%s] step %d/%d  loss %.4f  %.0f img/s  ETA %d:%02d ",
                  std::string(static_cast<size_t>(done), '=').c_str(),
                  std::string(static_cast<size_t>(width - done), ' ').c_str(), step, total_, loss,
                  images_per_s, static_cast<int>(eta_s) / 60, static_cast<int>(eta_s) % 60);
      if (step == total_) std::printf("\n");
    } else if (step == 1 || step % 10 == 0 || step == total_) {
      std::printf("step %d/%d loss %.4f %.0f img/s ETA %.0f s\n", step, total_, loss, images_per_s,
                  eta_s);
    }
    std::fflush(stdout);
  }

 private:
  int total_;
  bool tty_;
};

// Images and labels of the rows `rows` of a set held on the host.
std::pair<Tensor, Tensor> batch(const std::vector<uint8_t>& images,
                                const std::vector<uint8_t>& labels,
                                const std::vector<size_t>& rows) {
  constexpr size_t kPixels = 28 * 28;
  std::vector<uint8_t> x(rows.size() * kPixels);
  std::vector<int32_t> y(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(x.data() + i * kPixels, images.data() + rows[i] * kPixels, kPixels);
    y[i] = labels[rows[i]];
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  return {
      Tensor::from_bytes(x.data(), x.size(), {n, 1, 28, 28}, dtypes::uint8).cast(dtypes::float32) *
          (1.0 / 255),
      Tensor::from_vector(y, {n}, dtypes::int32)};
}

double accuracy(Model& model, const std::vector<uint8_t>& images,
                const std::vector<uint8_t>& labels) {
  const size_t n = labels.size(), chunk = 1000;
  int64_t right = 0;
  for (size_t at = 0; at < n; at += chunk) {
    std::vector<size_t> rows;
    for (size_t i = at; i < std::min(n, at + chunk); ++i) rows.push_back(i);
    auto [x, y] = batch(images, labels, rows);
    right += model(x).argmax(1).eq(y).cast(dtypes::int32).sum().item<int32_t>();
  }
  return static_cast<double>(right) / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    Tensor::manual_seed(o.seed);
    const nn::Mnist data = nn::load_mnist(o.data);
    const std::vector<uint8_t> x_train = Tensor(data.x_train).to_bytes(),
                               y_train = Tensor(data.y_train).to_bytes(),
                               x_test = Tensor(data.x_test).to_bytes(),
                               y_test = Tensor(data.y_test).to_bytes();
    Model model;
    if (!o.load.empty()) {
      nn::load_state_dict(model, nn::safe_load(o.load));
      std::printf("test accuracy %.4f (weights from %s)\n", accuracy(model, x_test, y_test),
                  o.load.c_str());
      return 0;
    }
    std::vector<Tensor*> params = nn::get_parameters(model), buffers = nn::get_buffers(model);
    nn::Adam opt(params, o.lr);
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<size_t> pick(0, y_train.size() - 1);
    Progress progress(o.steps);
    const auto start = std::chrono::steady_clock::now();
    Tensor::set_training(true);
    for (int step = 1; step <= o.steps; ++step) {
      std::vector<size_t> rows(static_cast<size_t>(o.bs));
      for (size_t& r : rows) r = pick(rng);
      auto [x, y] = batch(x_train, y_train, rows);
      // the learning rate falls linearly from --lr to a tenth of it over the run
      opt.set_lr(o.lr * (1.0 - 0.9 * (step - 1) / std::max(1, o.steps - 1)));
      opt.zero_grad();
      Tensor loss = model(x).sparse_categorical_crossentropy(y);
      loss.backward(params);
      std::vector<Tensor*> also{&loss};
      also.insert(also.end(), buffers.begin(), buffers.end());
      opt.step(also);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      progress.update(step, loss.item<float>(), step * o.bs / secs, secs / step * (o.steps - step));
    }
    Tensor::set_training(false);
    const double train_secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double acc = accuracy(model, x_test, y_test);
    std::printf("trained %d steps of %d images in %.1f s (%.0f img/s); test accuracy %.4f\n",
                o.steps, o.bs, train_secs, o.steps * o.bs / train_secs, acc);
    nn::safe_save(nn::get_state_dict(model), o.out, {{"steps", std::to_string(o.steps)}});
    std::printf("weights saved to %s\n", o.out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Gradients (rules/gradient.rw) against analytic derivatives and central finite differences, on
// both devices.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "on_device.h"
#include "tensor/tensor.h"

using namespace tinyrw;

namespace {

class Gradients : public OnDevice {};

std::vector<double> values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

// d f / d x by central differences, in float64.
std::vector<double> numeric(const std::function<Tensor(const Tensor&)>& f,
                            const std::vector<double>& x, const Dims& shape) {
  std::vector<double> out;
  const double h = 1e-5;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> p = x, m = x;
    p[i] += h;
    m[i] -= h;
    const double fp = f(Tensor::from_vector(p, shape, dtypes::float64)).to_doubles()[0];
    const double fm = f(Tensor::from_vector(m, shape, dtypes::float64)).to_doubles()[0];
    out.push_back((fp - fm) / (2 * h));
  }
  return out;
}

void check_numeric(const std::function<Tensor(const Tensor&)>& f, const Dims& shape,
                   uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const std::vector<double> x = values(static_cast<size_t>(n), seed);
  Tensor t = Tensor::from_vector(x, shape, dtypes::float64);
  const std::vector<double> got = f(t).gradient({t})[0].to_doubles(), want = numeric(f, x, shape);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, std::fabs(want[i]))) << "at " << i;
}

}  // namespace

TEST_P(Gradients, ElementwiseAnalytic) {
  const std::vector<float> xv = {0.5f, -1.0f, 2.0f}, yv = {3.0f, 0.25f, -1.5f};
  Tensor x = Tensor::from_vector(xv, {3}), y = Tensor::from_vector(yv, {3});
  auto g = (x * y + x.exp()).sum().gradient({x, y});
  const auto dx = g[0].to_doubles(), dy = g[1].to_doubles();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(dx[i], yv[i] + std::exp(xv[i]), 1e-5);
    EXPECT_NEAR(dy[i], xv[i], 1e-6);
  }
  // relu: 1 above zero, 0 below, half at the tie
  Tensor r = Tensor::from_vector(std::vector<float>{-1, 0, 2}, {3});
  const auto dr = r.relu().sum().gradient({r})[0].to_doubles();
  EXPECT_EQ(dr, (std::vector<double>{0, 0.5, 1}));
}

TEST_P(Gradients, PowEdgeCasesAtZero) {
  const std::vector<float> bv = {2, 0, 0, 0, 3}, ev = {3, 0, 2, -1, 0};
  Tensor b = Tensor::from_vector(bv, {5}), e = Tensor::from_vector(ev, {5});
  auto g = Tensor::alu(Op::Pow, {b, e}).sum().gradient({b, e});
  const auto db = g[0].to_doubles(), de = g[1].to_doubles();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> want_db = {12, 0, 0, -inf, 0},
                            want_de = {8 * std::log(2.0), 0, 0, -inf, std::log(3.0)};
  for (size_t i = 0; i < 5; ++i) {
    if (std::isinf(want_db[i]))
      EXPECT_EQ(db[i], want_db[i]) << "db at " << i;
    else
      EXPECT_NEAR(db[i], want_db[i], 1e-5) << "db at " << i;
    if (std::isinf(want_de[i]))
      EXPECT_EQ(de[i], want_de[i]) << "de at " << i;
    else
      EXPECT_NEAR(de[i], want_de[i], 1e-5) << "de at " << i;
  }
  // away from zero the base gradient matches central differences
  check_numeric(
      [](const Tensor& x) {
        return Tensor::alu(Op::Pow, {x * x + 0.5, x * 0.0 + 1.5}).sum();
      },
      {4}, 10);
}

TEST_P(Gradients, ReduceMaxSharesTiesAndProdDividesOut) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 3, 3, 2}, {4});
  EXPECT_EQ(x.max().gradient({x})[0].to_doubles(), (std::vector<double>{0, 0.5, 0.5, 0}));
  EXPECT_EQ(x.prod().gradient({x})[0].to_doubles(), (std::vector<double>{18, 6, 6, 9}));
}

// gradient() and assign() together: gradient descent on y = 3 x - 1 finds the line.
TEST_P(Gradients, GradientDescentWithAssignFitsALine) {
  const std::vector<float> xv = {-1, -0.5f, 0, 0.5f, 1, 1.5f};
  std::vector<float> yv;
  for (float v : xv) yv.push_back(3 * v - 1);
  const Tensor x = Tensor::from_vector(xv, {6}), y = Tensor::from_vector(yv, {6});
  Tensor w = Tensor::zeros({1}).realize(), b = Tensor::zeros({1}).realize();
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    Tensor err = x * w.expand({6}) + b.expand({6}) - y;
    Tensor loss = (err * err).mean();
    std::vector<Tensor> g = loss.gradient({w, b});
    (step == 0 ? first : last) = loss.to_doubles()[0];
    w.assign(w - g[0] * 0.3);
    b.assign(b - g[1] * 0.3);
    Tensor::realize_all({&w, &b});
  }
  EXPECT_LT(last, first * 1e-6);
  EXPECT_NEAR(w.to_doubles()[0], 3.0, 1e-3);
  EXPECT_NEAR(b.to_doubles()[0], -1.0, 1e-3);
}

TEST_P(Gradients, MatmulAnalytic) {
  const std::vector<float> av = {1, 2, 3, 4, 5, 6}, bv = {1, -1, 2, 0.5f, 3, 1};
  Tensor a = Tensor::from_vector(av, {2, 3}), b = Tensor::from_vector(bv, {3, 2});
  auto g = a.matmul(b).sum().gradient({a, b});
  const auto da = g[0].to_doubles(), db = g[1].to_doubles();
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k)
      EXPECT_NEAR(da[static_cast<size_t>(i * 3 + k)],
                  bv[static_cast<size_t>(k * 2)] + bv[static_cast<size_t>(k * 2 + 1)], 1e-5);
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 2; ++j)
      EXPECT_NEAR(db[static_cast<size_t>(k * 2 + j)],
                  av[static_cast<size_t>(k)] + av[static_cast<size_t>(3 + k)], 1e-5);
}

TEST_P(Gradients, NumericThroughEveryOp) {
  check_numeric(
      [](const Tensor& x) { return (x.sin() * (x * x + 0.5).sqrt().maximum(x * 0.0 + 0.9)).sum(); },
      {4}, 1);
  check_numeric([](const Tensor& x) { return (x.exp2() + x.tanh()).sum(); }, {5}, 2);
  check_numeric([](const Tensor& x) { return x.softmax().log().mean(); }, {2, 3}, 3);
  check_numeric(
      [](const Tensor& x) {
        return (x.pad({{1, 0}, {0, 2}}).flip({1}) * x.pad({{0, 1}, {2, 0}})).sum();
      },
      {2, 2}, 4);
  check_numeric(
      [](const Tensor& x) {
        return (x.permute({1, 0}).reshape({6}) * Tensor::arange(6).cast(dtypes::float64)).sum();
      },
      {2, 3}, 5);
  check_numeric(
      [](const Tensor& x) {
        return x.shrink({{0, 2}, {1, 3}}).max({1}).sum();
      },
      {3, 3}, 6);
  check_numeric(
      [](const Tensor& x) {
        return (x.reshape({3, 1}).expand({3, 4}) /
                (x.reshape({1, 3}).expand({4, 3}).transpose() + 5.0))
            .sum();
      },
      {3}, 7);
  check_numeric([](const Tensor& x) { return (x * x).prod(); }, {3}, 8);
  check_numeric(
      [](const Tensor& x) {
        return Tensor::alu(Op::MulAcc, {x, x * 2.0, x.sin()}).sum();
      },
      {3}, 11);
  check_numeric(
      [](const Tensor& x) { return x.lt(x * 0.0).where(x * 3.0, x.log2() * 0.0 + x).sum(); }, {4},
      9);
}

TEST_P(Gradients, BackwardAccumulatesIntoTheSameObject) {
  Tensor w = Tensor::from_vector(std::vector<float>{1, 2}, {2});
  const Tensor loss = (w * w).sum();
  loss.backward({&w});
  Tensor* first = w.grad();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->to_doubles(), (std::vector<double>{2, 4}));
  loss.backward({&w});
  EXPECT_EQ(w.grad(), first);  // the same object
  EXPECT_EQ(w.grad()->to_doubles(), (std::vector<double>{4, 8}));
}

TEST_P(Gradients, ErrorsAndUnusedTargets) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2}, {2});
  Tensor unused = Tensor::from_vector(std::vector<float>{5, 6, 7}, {3});
  EXPECT_EQ(x.sum().gradient({unused})[0].to_doubles(), (std::vector<double>{0, 0, 0}));
  EXPECT_THROW(x.gradient({x}), TensorError);  // non-scalar without a seed
  const Tensor seed = Tensor::from_vector(std::vector<float>{1, 10}, {2});
  EXPECT_EQ((x * 3.0).gradient({x}, &seed)[0].to_doubles(), (std::vector<double>{3, 30}));
  Tensor i = Tensor::from_vector(std::vector<int32_t>{1}, {1}, dtypes::int32);
  EXPECT_THROW(i.sum().gradient({i}), TensorError);  // not a float
  // an integer division on the path has no gradient rule: an error naming the op, not a zero
  try {
    const Tensor two = Tensor::from_vector(std::vector<int32_t>{2, 2}, {2}, dtypes::int32);
    (void)Tensor::alu(Op::FloorDiv, {x.cast(dtypes::int32), two})
        .cast(dtypes::float32)
        .sum()
        .gradient({x});
    ADD_FAILURE() << "no error for a path without gradient rules";
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("no gradient rule"), std::string::npos) << e.what();
  }
  try {
    (void)x.gradient({x});
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a seed"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Gradients, ::testing::ValuesIn(test_devices()), device_test_name);

// realize() replaces a tensor's graph by its buffer; gradients still follow the graph it was
// computed by, instead of silently finding no path
TEST_P(Gradients, GradientOfARealizedTensor) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor loss = (x * x).sum();
  EXPECT_EQ(loss.item<float>(), 14.0f);  // realized
  EXPECT_EQ(loss.gradient({x})[0].to_doubles(), (std::vector<double>{2, 4, 6}));
  // a target that was realized is found through its graph as well
  Tensor h = x * 3.0f;
  Tensor out = (h * h).sum();
  h.realize();
  EXPECT_EQ(out.gradient({h})[0].to_doubles(), (std::vector<double>{6, 12, 18}));
  // reached both as its buffer and through its graph: both paths count
  Tensor h2 = x * 3.0f;
  const Tensor sq = h2 * h2;
  h2.realize();
  EXPECT_EQ((sq + h2).sum().gradient({h2})[0].to_doubles(), (std::vector<double>{7, 13, 19}));
  // the graph's buffers stay readable after the tensors that made them are gone
  Tensor w = Tensor::from_vector(std::vector<float>{1, 1, 1}, {3}).realize();
  Tensor y = [&] {
    const Tensor scratch = Tensor::from_vector(std::vector<float>{4, 5, 6}, {3});
    return (scratch * w).sum();
  }();
  y.realize();
  EXPECT_EQ(y.gradient({w})[0].to_doubles(), (std::vector<double>{4, 5, 6}));
  // once assigned to, the tensor is differentiated as its new value
  loss.assign(Tensor::full({}, 5.0) * x.sum());
  EXPECT_EQ(loss.gradient({x})[0].to_doubles(), (std::vector<double>{5, 5, 5}));
}

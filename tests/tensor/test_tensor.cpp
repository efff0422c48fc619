// Tensor operations against plain C++ reference loops, on every available device; fusion
// (kernel counts) and errors raised where the user made them.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "ir/viz.h"
#include "on_device.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"
#include "tests/scoped_env.h"

using namespace tinyrw;

namespace {

std::vector<float> iota_values(size_t n, float start = 1, float step = 1) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "at " << i;
}

class TensorOps : public OnDevice {};

}  // namespace

TEST_P(TensorOps, ElementwiseWithBroadcasting) {
  const auto av = iota_values(6), bv = iota_values(3, 10, 10);
  Tensor a = Tensor::from_vector(av, {2, 3}), b = Tensor::from_vector(bv, {3});
  std::vector<double> want_add, want_mul, want_max, want_div;
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j) {
      const double x = av[i * 3 + j], y = bv[j];
      want_add.push_back(x + y);
      want_mul.push_back(x * y);
      want_max.push_back(std::max(x, 25.0));
      want_div.push_back(static_cast<float>(x / y));
    }
  expect_near((a + b).to_doubles(), want_add);
  expect_near((a * b).to_doubles(), want_mul);
  expect_near(a.maximum(Tensor::full({1}, 25)).to_doubles(), std::vector<double>(6, 25.0));
  expect_near((a / b).to_doubles(), want_div);
  expect_near((-a).to_doubles(), {-1, -2, -3, -4, -5, -6});
}

TEST_P(TensorOps, UnaryMath) {
  const auto v = iota_values(5, 0.5f, 0.5f);
  Tensor t = Tensor::from_vector(v, {5});
  std::vector<double> e, l, s, q, sg;
  for (float x : v) {
    e.push_back(std::exp(x));
    l.push_back(std::log(x));
    s.push_back(std::sin(x));
    q.push_back(std::sqrt(x));
    sg.push_back(1 / (1 + std::exp(-x)));
  }
  expect_near(t.exp().to_doubles(), e, 1e-5);
  expect_near(t.log().to_doubles(), l, 1e-5);
  expect_near(t.sin().to_doubles(), s, 1e-5);
  expect_near(t.sqrt().to_doubles(), q, 1e-5);
  expect_near(t.sigmoid().to_doubles(), sg, 1e-5);
  expect_near((t - 1.5).relu().to_doubles(), {0, 0, 0, 0.5, 1.0});
}

TEST_P(TensorOps, ComparisonsAndWhere) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 5, 3, 7}, {4});
  Tensor b = Tensor::from_vector(std::vector<float>{2, 4, 3, 8}, {4});
  expect_near(a.lt(b).where(a, b).to_doubles(), {1, 4, 3, 7});
  expect_near(a.eq(b).cast(dtypes::float32).to_doubles(), {0, 0, 1, 0});
  expect_near(a.ne(b).cast(dtypes::int32).to_doubles(), {1, 1, 0, 1});
}

TEST_P(TensorOps, Movement) {
  const auto v = iota_values(24, 0);
  Tensor t = Tensor::from_vector(v, {2, 3, 4});
  std::vector<double> perm;  // permute (2, 0, 1): out[k][i][j] = t[i][j][k]
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) perm.push_back(v[static_cast<size_t>(i * 12 + j * 4 + k)]);
  expect_near(t.permute({2, 0, 1}).to_doubles(), perm);
  expect_near(t.reshape({4, -1}).to_doubles(), std::vector<double>(v.begin(), v.end()));
  std::vector<double> shr;  // shrink to [1:2, 0:3:, 1:3]
  for (int j = 0; j < 3; ++j)
    for (int k = 1; k < 3; ++k) shr.push_back(v[static_cast<size_t>(12 + j * 4 + k)]);
  expect_near(t.shrink({{1, 2}, {0, 3}, {1, 3}}).to_doubles(), shr);
  std::vector<double> fl;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 3; k >= 0; --k) fl.push_back(v[static_cast<size_t>(i * 12 + j * 4 + k)]);
  expect_near(t.flip({2}).to_doubles(), fl);
  Tensor m = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  expect_near(m.pad({{1, 1}, {0, 1}}).to_doubles(), {0, 0, 0, 1, 2, 0, 3, 4, 0, 0, 0, 0});
  expect_near(m.reshape({2, 1, 2}).expand({2, 3, 2}).to_doubles(),
              {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  expect_near(m.transpose().to_doubles(), {1, 3, 2, 4});
}

TEST_P(TensorOps, Reductions) {
  const auto v = iota_values(12);
  Tensor t = Tensor::from_vector(v, {3, 4});
  std::vector<double> rows(3, 0), cols(4, 0), rmax(3, -1e9);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      rows[i] += v[static_cast<size_t>(i * 4 + j)];
      cols[j] += v[static_cast<size_t>(i * 4 + j)];
      rmax[i] = std::max(rmax[i], static_cast<double>(v[static_cast<size_t>(i * 4 + j)]));
    }
  expect_near(t.sum().to_doubles(), {78});
  expect_near(t.sum({1}).to_doubles(), rows);
  expect_near(t.sum({0}).to_doubles(), cols);
  expect_near(t.sum({1}, true).reshape({3}).to_doubles(), rows);
  EXPECT_EQ(t.sum({1}, true).shape(), (Dims{3, 1}));
  expect_near(t.max({1}).to_doubles(), rmax);
  expect_near(t.mean().to_doubles(), {6.5});
}

TEST_P(TensorOps, Matmul) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  const int m = 5, k = 7, n = 3;
  std::vector<float> a(m * k), b(k * n);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  std::vector<double> want(m * n, 0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int p = 0; p < k; ++p)
        acc += a[static_cast<size_t>(i * k + p)] * b[static_cast<size_t>(p * n + j)];
      want[static_cast<size_t>(i * n + j)] = acc;
    }
  expect_near(Tensor::from_vector(a, {m, k}).matmul(Tensor::from_vector(b, {k, n})).to_doubles(),
              want, 1e-4);
}

// tinygrad's dot: vectors on either side, batched matrices whose batch axes broadcast.
TEST_P(TensorOps, MatmulOfVectorsAndBatches) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  auto values = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  // the product of a[batch_a][m][k] and b[batch_b][k][n], batch index i of the result reading
  // batch i % batch of each (a batch of 1 broadcasts)
  auto reference = [](const std::vector<float>& a, const std::vector<float>& b, int batches,
                      int batch_a, int batch_b, int m, int k, int n) {
    std::vector<double> out;
    for (int t = 0; t < batches; ++t)
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double acc = 0;
          for (int p = 0; p < k; ++p)
            acc += static_cast<double>(a[static_cast<size_t>(((t % batch_a) * m + i) * k + p)]) *
                   b[static_cast<size_t>(((t % batch_b) * k + p) * n + j)];
          out.push_back(acc);
        }
    return out;
  };
  const auto v7 = values(7), m35 = values(35), m73 = values(21), v7b = values(7),
             a3 = values(3 * 4 * 7), b3 = values(3 * 7 * 2);
  const Tensor vec = Tensor::from_vector(v7, {7});
  // vector . matrix, matrix . vector, vector . vector: the vector's axis is dropped
  Tensor vm = vec.matmul(Tensor::from_vector(m73, {7, 3}));
  EXPECT_EQ(vm.shape(), (std::vector<int64_t>{3}));
  expect_near(vm.to_doubles(), reference(v7, m73, 1, 1, 1, 1, 7, 3), 1e-5);
  Tensor mv = Tensor::from_vector(m35, {5, 7}).matmul(vec);
  EXPECT_EQ(mv.shape(), (std::vector<int64_t>{5}));
  expect_near(mv.to_doubles(), reference(m35, v7, 1, 1, 1, 5, 7, 1), 1e-5);
  Tensor vv = vec.matmul(Tensor::from_vector(v7b, {7}));
  EXPECT_EQ(vv.shape(), (std::vector<int64_t>{}));
  expect_near(vv.to_doubles(), reference(v7, v7b, 1, 1, 1, 1, 7, 1), 1e-5);
  // batched on both sides, and a batch of one against three
  Tensor bb = Tensor::from_vector(a3, {3, 4, 7}).matmul(Tensor::from_vector(b3, {3, 7, 2}));
  EXPECT_EQ(bb.shape(), (std::vector<int64_t>{3, 4, 2}));
  expect_near(bb.to_doubles(), reference(a3, b3, 3, 3, 3, 4, 7, 2), 1e-5);
  Tensor b1 = Tensor::from_vector(std::vector<float>(a3.begin(), a3.begin() + 28), {1, 4, 7})
                  .matmul(Tensor::from_vector(b3, {3, 7, 2}));
  EXPECT_EQ(b1.shape(), (std::vector<int64_t>{3, 4, 2}));
  expect_near(b1.to_doubles(), reference(a3, b3, 3, 1, 3, 4, 7, 2), 1e-5);
  // a matrix against a batch: the matrix broadcasts
  Tensor mb = Tensor::from_vector(std::vector<float>(a3.begin(), a3.begin() + 28), {4, 7})
                  .matmul(Tensor::from_vector(b3, {3, 7, 2}));
  EXPECT_EQ(mb.shape(), (std::vector<int64_t>{3, 4, 2}));
  expect_near(mb.to_doubles(), reference(a3, b3, 3, 1, 3, 4, 7, 2), 1e-5);
  // int operands give an int product
  const Tensor ia = Tensor::from_vector(std::vector<int32_t>{1, 2, 3}, {3}, dtypes::int32);
  EXPECT_EQ(ia.matmul(ia).dtype(), dtypes::int32);
  EXPECT_EQ(ia.matmul(ia).to_doubles(), (std::vector<double>{14}));
  expect_error<TensorError>([&] { (void)Tensor::full({}, 1.0).matmul(vec); },
                            "both operands need at least one axis");
  expect_error<TensorError>(
      [&] {
        (void)vec.matmul(Tensor::zeros({3, 7}));
      },
      "matmul shapes (7,) and (3, 7) do not align (7 != 3)");
}

TEST_P(TensorOps, ZeroAndOneSizedDims) {
  Tensor e = Tensor::zeros({0, 3});
  EXPECT_EQ((e + 1.0).numel(), 0);
  EXPECT_TRUE((e + 1.0).to_doubles().empty());
  expect_near(e.sum({0}).to_doubles(), {0, 0, 0});
  Tensor one = Tensor::from_vector(std::vector<float>{4}, {1, 1});
  expect_near((one * Tensor::from_vector(iota_values(3), {3})).to_doubles(), {4, 8, 12});
}

TEST_P(TensorOps, IntegerDtypes) {
  Tensor a = Tensor::from_vector(std::vector<int32_t>{7, -7, 100, 3}, {4}, dtypes::int32);
  Tensor b = Tensor::from_vector(std::vector<int32_t>{2, 2, 30, 5}, {4}, dtypes::int32);
  EXPECT_EQ((a + b).data<int32_t>(), (std::vector<int32_t>{9, -5, 130, 8}));
  EXPECT_EQ((a * b).data<int32_t>(), (std::vector<int32_t>{14, -14, 3000, 15}));
  EXPECT_EQ(a.sum().data<int32_t>(), (std::vector<int32_t>{103}));
  Tensor c =
      Tensor::from_vector(std::vector<int32_t>{100, 200}, {2}, dtypes::int32).cast(dtypes::int8);
  EXPECT_EQ(c.data<int32_t>(), (std::vector<int32_t>{100, -56}));  // wraps like C
  EXPECT_EQ(Tensor::arange(2, 11, 3).data<int32_t>(), (std::vector<int32_t>{2, 5, 8}));
}

TEST_P(TensorOps, NonContiguousViewsChained) {
  const auto v = iota_values(16, 0);
  Tensor t = Tensor::from_vector(v, {4, 4});
  // transpose, shrink and flip, then elementwise with the original
  Tensor x = t.transpose().shrink({{1, 3}, {0, 4}}).flip({0});
  std::vector<double> want;
  for (int i = 2; i >= 1; --i)
    for (int j = 0; j < 4; ++j)
      want.push_back(v[static_cast<size_t>(j * 4 + i)] + v[static_cast<size_t>(i * 4 + j)]);
  expect_near((x + t.shrink({{1, 3}, {0, 4}}).flip({0})).to_doubles(), want);
}

// Values the symbolic rules fold to a constant (x // x is 1, x == x is True) under movement ops
// and reductions: a padded region still reads 0, and a reduction still counts every element. The
// fold drops the value's shape, so the views' index math must run first (range propagation
// indexes every view before any value is simplified).
TEST_P(TensorOps, FoldedConstantsUnderViews) {
  const Tensor a =
      Tensor::from_vector(std::vector<int32_t>{7, -7, 100, 4, 5, 6}, {2, 3}, dtypes::int32);
  const Tensor one = Tensor::alu(Op::FloorDiv, {a, a});
  EXPECT_EQ(one.pad({{1, 1}, {0, 0}}).to_doubles(),
            (std::vector<double>{0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(a.eq(a).cast(dtypes::float32).pad({{0, 0}, {1, 0}}).to_doubles(),
            (std::vector<double>{0, 1, 1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(one.pad({{0, 1}, {1, 0}}).shrink({{1, 3}, {0, 2}}).to_doubles(),
            (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(one.permute({1, 0}).pad({{1, 0}, {0, 1}}).to_doubles(),
            (std::vector<double>{0, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(one.flip({1}).pad({{0, 0}, {2, 0}}).to_doubles(),
            (std::vector<double>{0, 0, 1, 1, 1, 0, 0, 1, 1, 1}));
  EXPECT_EQ(one.sum().to_doubles(), (std::vector<double>{6}));
  EXPECT_EQ(one.sum({0}).to_doubles(), (std::vector<double>{2, 2, 2}));
  // a nonzero constant padded (full() keeps its shape as views of a scalar)
  EXPECT_EQ(Tensor::full({3}, 5.0).pad({{1, 1}}).to_doubles(),
            (std::vector<double>{0, 5, 5, 5, 0}));
}

INSTANTIATE_TEST_SUITE_P(Devices, TensorOps, ::testing::ValuesIn(test_devices()), device_test_name);

TEST(TensorFusion, KernelCounts) {
  set_default_device("INTERP");
  Tensor a = Tensor::from_vector(iota_values(8), {8}), b = Tensor::from_vector(iota_values(8), {8}),
         c = Tensor::from_vector(iota_values(8), {8});
  (void)(a + b * c).to_doubles();
  EXPECT_EQ(last_kernel_count(), 1);
  (void)(a + b).sum().to_doubles();
  EXPECT_EQ(last_kernel_count(), 1);
  (void)a.reshape({2, 4}).matmul(b.reshape({4, 2})).to_doubles();
  EXPECT_EQ(last_kernel_count(), 1);
  // a mean with no axis left is recomputed per element (tinygrad's r_8_8): 1 kernel
  const std::vector<double> centered = (a - a.mean()).to_doubles();
  EXPECT_EQ(last_kernel_count(), 1);
  for (size_t i = 0; i < centered.size(); ++i)
    EXPECT_DOUBLE_EQ(centered[i], static_cast<double>(i) - 3.5);
  // a row mean broadcast back over its rows is a kernel of its own: 2
  const Tensor m = a.reshape({2, 4});
  const std::vector<double> rows = (m - m.mean({1}, true)).to_doubles();
  EXPECT_EQ(last_kernel_count(), 2);
  for (size_t i = 0; i < rows.size(); ++i)
    EXPECT_DOUBLE_EQ(rows[i], static_cast<double>(i % 4) - 1.5);
  set_default_device("");
}

// A VIZ trace shows where realize() cut the graph: each rangeify stage a named call whose steps are
// attributed to the .rw rules that made them.
TEST(TensorFusion, VizRecordsTheRangeifyDecisions) {
  // (scheduled here, not replayed from a schedule an earlier test of this process cached)
  const ScopedEnv no_schedule_cache("SCACHE", "0");
  set_default_device("INTERP");
  const Tensor a = Tensor::from_vector(iota_values(8), {8}).realize();
  viz::clear();
  viz::enable();
  const Tensor m = a.reshape({2, 4});
  (void)(m - m.mean({1}, true)).to_doubles();  // the mean is broadcast: realized by rangeify
  viz::disable();
  const auto doc = nlohmann::json::parse(viz::to_json());
  viz::clear();
  // the rules that fired in each stage, with the ops they fired on
  std::map<std::string, std::set<std::string>> rules, ops;
  for (const auto& call : doc["calls"])
    for (const auto& m : call["matches"]) {
      rules[call["name"]].insert(m["rule"]["name"].get<std::string>() + "@" +
                                 m["rule"]["file"].get<std::string>());
      ops[call["name"]].insert(doc["nodes"][m["before"].get<size_t>()]["op"]);
    }
  // the root asks for a buffer; range propagation realizes the root (ADD), the mean broadcast
  // after its REDUCE (MUL: the sum times 1/4) and the input view its two readers index
  // differently (RESHAPE); the cleanups recompute the view and the root reads the mean
  EXPECT_EQ(rules["realize map"], (std::set<std::string>{"realize_map.root@rules/rangeify.rw"}));
  EXPECT_EQ(rules["range propagation"],
            (std::set<std::string>{"range_step.computes@rules/indexing.rw",
                                   "range_step.view@rules/indexing.rw"}));
  EXPECT_EQ(ops["range propagation"], (std::set<std::string>{"ADD", "MUL", "RESHAPE"}));
  EXPECT_EQ(rules["cleanups"],
            (std::set<std::string>{"remove_bufferize.remove@rules/rangeify.rw"}));
  EXPECT_TRUE(rules["add buffers"].contains("add_buffers.stage@rules/rangeify.rw"));
  EXPECT_EQ(last_kernel_count(), 2);
  set_default_device("");
}

TEST(TensorErrors, RaisedWhereTheUserMadeThem) {
  Tensor a = Tensor::zeros({2, 3});
  EXPECT_THROW(a.reshape({4, 2}), TensorError);
  EXPECT_THROW(a.reshape({-1, -1}), TensorError);
  EXPECT_THROW(a + Tensor::zeros({4}), TensorError);
  EXPECT_THROW(a.permute({0, 0}), TensorError);
  EXPECT_THROW(a.sum({5}), TensorError);
  EXPECT_THROW(a.shrink({{0, 3}, {0, 3}}), TensorError);
  EXPECT_THROW(a.expand({4, 3}), TensorError);
  EXPECT_THROW(a.matmul(Tensor::zeros({2, 3})), TensorError);
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), TensorError);
  try {
    (void)(a + Tensor::zeros({4}));
  } catch (const TensorError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot broadcast (2, 3) and (4,)"), std::string::npos)
        << e.what();
  }
}

TEST_P(TensorOps, MoreElementwise) {
  const std::vector<float> v = {-1.5f, -0.5f, 0.25f, 1.0f, 2.0f};
  Tensor t = Tensor::from_vector(v, {5});
  std::vector<double> c, th, ge, rs, pw;
  for (float x : v) {
    c.push_back(std::cos(x));
    th.push_back(std::tanh(x));
    ge.push_back(0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
    rs.push_back(x > 0 ? 1 / std::sqrt(x) : NAN);
    pw.push_back(std::pow(std::fabs(x), 1.5));
  }
  expect_near(t.cos().to_doubles(), c, 1e-5);
  expect_near(t.tanh().to_doubles(), th, 1e-5);
  expect_near(t.gelu().to_doubles(), ge, 1e-5);
  auto r = t.shrink({{2, 5}}).rsqrt().to_doubles();
  expect_near(r, std::vector<double>(rs.begin() + 2, rs.end()), 1e-5);
  Tensor ab = t.maximum(-t);
  expect_near(ab.pow(Tensor::full({5}, 1.5)).to_doubles(), pw, 1e-4);
  expect_near(t.le(Tensor::full({1}, 0.25)).cast(dtypes::float32).to_doubles(), {1, 1, 1, 0, 0});
  expect_near(t.ge(Tensor::full({1}, 0.25)).cast(dtypes::float32).to_doubles(), {0, 0, 1, 1, 1});
  Tensor i = Tensor::from_vector(std::vector<int32_t>{12, 10, 7}, {3}, dtypes::int32);
  Tensor j = Tensor::from_vector(std::vector<int32_t>{10, 6, 1}, {3}, dtypes::int32);
  EXPECT_EQ(i.bitwise_and(j).data<int32_t>(), (std::vector<int32_t>{8, 2, 1}));
  EXPECT_EQ(i.bitwise_or(j).data<int32_t>(), (std::vector<int32_t>{14, 14, 7}));
  EXPECT_EQ(i.bitwise_xor(j).data<int32_t>(), (std::vector<int32_t>{6, 12, 6}));
  EXPECT_EQ(
      i.logical_and(j.lt(Tensor::full({3}, 5, dtypes::int32))).cast(dtypes::int32).data<int32_t>(),
      (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(i.lt(Tensor::full({3}, 8, dtypes::int32))
                .logical_or(j.lt(Tensor::full({3}, 2, dtypes::int32)))
                .cast(dtypes::int32)
                .data<int32_t>(),
            (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(
      Tensor::from_vector(std::vector<float>{1.0f}, {1}).bitcast(dtypes::int32).data<int32_t>(),
      (std::vector<int32_t>{0x3f800000}));
  EXPECT_THROW(t.bitcast(dtypes::int64), TensorError);
}

TEST_P(TensorOps, MoreReductions) {
  const std::vector<float> v = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
  Tensor t = Tensor::from_vector(v, {3, 4});
  expect_near(t.min({1}).to_doubles(), {1, 2, 3});
  expect_near(t.prod({0}).to_doubles(), {3 * 5 * 5, 1 * 9 * 3, 4 * 2 * 5, 1 * 6 * 8});
  EXPECT_EQ(t.argmax(1).data<int32_t>(), (std::vector<int32_t>{2, 1, 3}));
  EXPECT_EQ(t.argmax(0).data<int32_t>(), (std::vector<int32_t>{1, 1, 2, 2}));
  double mean = 0, var = 0;
  for (float x : v) mean += x / 12.0;
  for (float x : v) var += (x - mean) * (x - mean) / 11.0;
  expect_near(t.var().to_doubles(), {var}, 1e-5);
  expect_near(t.std().to_doubles(), {std::sqrt(var)}, 1e-5);
  std::vector<double> sm, lsm;
  for (int r = 0; r < 3; ++r) {
    double mx = -1e9, z = 0;
    for (int c = 0; c < 4; ++c)
      mx = std::max(mx, static_cast<double>(v[static_cast<size_t>(r * 4 + c)]));
    for (int c = 0; c < 4; ++c) z += std::exp(v[static_cast<size_t>(r * 4 + c)] - mx);
    for (int c = 0; c < 4; ++c) {
      sm.push_back(std::exp(v[static_cast<size_t>(r * 4 + c)] - mx) / z);
      lsm.push_back(v[static_cast<size_t>(r * 4 + c)] - mx - std::log(z));
    }
  }
  expect_near(t.softmax().to_doubles(), sm, 1e-5);
  expect_near(t.log_softmax().to_doubles(), lsm, 1e-5);
  EXPECT_FLOAT_EQ(t.sum().item<float>(), 52.0f);
  EXPECT_THROW(t.item<float>(), TensorError);
}

TEST_P(TensorOps, CreationAndSlicing) {
  expect_near(Tensor::linspace(0, 1, 5).to_doubles(), {0, 0.25, 0.5, 0.75, 1});
  expect_near(Tensor::eye(3).to_doubles(), {1, 0, 0, 0, 1, 0, 0, 0, 1});
  const auto r = Tensor::rand({1000}, 42).to_doubles();
  double mean = 0;
  for (double x : r) {
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
    mean += x / 1000;
  }
  EXPECT_NEAR(mean, 0.5, 0.05);
  EXPECT_EQ(Tensor::rand({8}, 7).to_doubles(), Tensor::rand({8}, 7).to_doubles());  // seedable
  EXPECT_NE(Tensor::rand({8}, 7).to_doubles(), Tensor::rand({8}, 8).to_doubles());
  const auto n = Tensor::randn({2000}, 3).to_doubles();
  double m = 0, s2 = 0;
  for (double x : n) m += x / 2000;
  for (double x : n) s2 += (x - m) * (x - m) / 2000;
  EXPECT_NEAR(m, 0.0, 0.1);
  EXPECT_NEAR(s2, 1.0, 0.15);
  const auto v = iota_values(10, 0);
  Tensor t = Tensor::from_vector(v, {10});
  expect_near(t.slice({{1, 8, 3}}).to_doubles(), {1, 4, 7});
  expect_near(t.slice({{8, 1, -2}}).to_doubles(), {8, 6, 4, 2});
  expect_near(t.slice({{-3, 100, 1}}).to_doubles(), {7, 8, 9});
  Tensor m2 = Tensor::from_vector(iota_values(12, 0), {3, 4});
  expect_near(m2.slice({{0, 3, 2}, {1, 4, 2}}).to_doubles(), {1, 3, 9, 11});
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2}, {1, 2}),
         b = Tensor::from_vector(std::vector<float>{3, 4, 5, 6}, {2, 2});
  expect_near(Tensor::cat({a, b}, 0).to_doubles(), {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Tensor::stack({a, a}, 0).shape(), (Dims{2, 1, 2}));
  expect_near(Tensor::stack({a, a}, 0).to_doubles(), {1, 2, 1, 2});
  EXPECT_THROW(Tensor::cat({a, Tensor::zeros({2, 3})}, 0), TensorError);
}

TEST_P(TensorOps, EveryFloatDtype) {
  for (DType d : {dtypes::float16, dtypes::bfloat16, dtypes::float32, dtypes::float64}) {
    const std::vector<double> v = {0.1, 1.5, -2.25, 3.0};
    Tensor a = Tensor::from_vector(v, {4}, d),
           b = Tensor::from_vector(std::vector<double>{0.3, 0.5, 0.75, -1}, {4}, d);
    std::vector<double> want;
    for (size_t i = 0; i < 4; ++i) {
      // each input and the result are rounded to the dtype's precision; a float32 or float64
      // x * y + x in a kernel is one fused multiply-add (the spec's MulAcc), rounded once
      const double x = truncate_float(d, v[i]),
                   y = truncate_float(d, std::vector<double>{0.3, 0.5, 0.75, -1}[i]);
      want.push_back(d == dtypes::float32   ? std::fma(static_cast<float>(x), static_cast<float>(y),
                                                       static_cast<float>(x))
                     : d == dtypes::float64 ? std::fma(x, y, x)
                                            : truncate_float(d, truncate_float(d, x * y) + x));
    }
    const auto got = (a * b + a).to_doubles();
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(got[i], want[i]) << d.repr() << " at " << i;
    EXPECT_EQ((a * b + a).dtype(), d);
  }
}

TEST_P(TensorOps, EveryIntDtypeWraps) {
  for (DType d : {dtypes::int8, dtypes::int16, dtypes::int32, dtypes::int64, dtypes::uint8,
                  dtypes::uint16, dtypes::uint32, dtypes::uint64}) {
    Tensor a = Tensor::from_vector(std::vector<int64_t>{100, 7, 1}, {3}, d);
    const auto got = (a * a + a).data<int64_t>();
    for (size_t i = 0; i < 3; ++i) {
      const i128 x = std::vector<i128>{100, 7, 1}[i];
      EXPECT_EQ(static_cast<i128>(got[i]), truncate_int(d, truncate_int(d, x * x) + x))
          << d.repr() << " at " << i;
    }
  }
  Tensor b = Tensor::from_vector(std::vector<int32_t>{1, 0, 1}, {3}, dtypes::bool_);
  EXPECT_EQ(b.logical_not().cast(dtypes::int32).data<int32_t>(), (std::vector<int32_t>{0, 1, 0}));
}

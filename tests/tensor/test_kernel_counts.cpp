// Kernel counts equal to tinygrad's (a9069c17; split_reduceop, on by default, reaches none of the
// table's programs): the programs of issue 13's table
// and of /work/notes/issue13-tg/counts.py, inputs realized first (tinygrad:
// Tensor.ones(...).contiguous().realize()), counted with last_kernel_count() when the output is
// realized, and each result checked against loops over the same inputs. Both devices.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <tuple>
#include <vector>

#include "ir/graph.h"
#include "on_device.h"
#include "tensor/tensor.h"
#include "tests/scoped_env.h"

using namespace tinyrw;

namespace {

class KernelCounts : public OnDevice {};

// A realized input whose element i is (i % 7) + 1 scaled by `scale` (distinct values, so a wrong
// index shows in the result).
Tensor input(Dims shape, double scale = 1.0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>((i % 7 + 1) * scale);
  return Tensor::from_vector(v, shape).realize();
}

// Realizes `out` and returns (kernels run, its values).
std::pair<int, std::vector<float>> run(Tensor out) {
  out.realize();
  const int kernels = last_kernel_count();
  return {kernels, out.data<float>()};
}

void expect_near(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << "element " << i;
}

// c[i, j] = sum_k a[i, k] * b[k, j] in double, over a's and b's host values (batched: the leading
// axis of both, or none)
std::vector<double> matmul_ref(Tensor a, Tensor b, int64_t batch, int64_t m, int64_t k, int64_t n) {
  const std::vector<float> ha = a.data<float>(), hb = b.data<float>();
  std::vector<double> out(static_cast<size_t>(batch * m * n), 0);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t l = 0; l < k; ++l)
          out[static_cast<size_t>((t * m + i) * n + j)] +=
              double{ha[static_cast<size_t>((t * m + i) * k + l)]} *
              hb[static_cast<size_t>((t * k + l) * n + j)];
  return out;
}

// got (x @ y, both n x n) against a double reference at the given rows and columns only (the
// whole product is too slow to compute on the host for the large cases)
void expect_matmul_at(const std::vector<float>& got, Tensor x, Tensor y, int64_t n,
                      std::initializer_list<int64_t> rows, std::initializer_list<int64_t> cols) {
  const std::vector<float> hx = x.data<float>(), hy = y.data<float>();
  for (int64_t i : rows)
    for (int64_t j : cols) {
      double want = 0;
      for (int64_t l = 0; l < n; ++l)
        want += double{hx[static_cast<size_t>(i * n + l)]} * hy[static_cast<size_t>(l * n + j)];
      EXPECT_NEAR(got[static_cast<size_t>(i * n + j)], want, 1e-4 * (1 + std::fabs(want)))
          << i << ", " << j;
    }
}

// Row-major reference loops over a's host values.
std::vector<double> host(Tensor t) {
  std::vector<double> out;
  for (float f : t.data<float>()) out.push_back(f);
  return out;
}

// A program, built either fused or with every intermediate realized first (its reference: another
// cut of the same graph), and tinygrad's kernel count for it.
struct Case {
  const char* name;
  std::function<Tensor(bool)> build;  // bool: realize every intermediate
  int kernels;
};

// Each case runs tinygrad's number of kernels and gives its reference's values.
void expect_counts(const std::vector<Case>& cases) {
  for (const Case& k : cases) {
    auto [kernels, got] = run(k.build(false));
    EXPECT_EQ(kernels, k.kernels) << k.name;
    const std::vector<float> want = k.build(true).data<float>();
    ASSERT_EQ(got.size(), want.size()) << k.name;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-3 * (1 + std::fabs(want[i]))) << k.name << " element " << i;
  }
}

}  // namespace

// tinygrad r_4_4: the sum is computed in the kernel that adds b (no kernel of its own).
TEST_P(KernelCounts, SumKeepdimPlusColumn) {
  const Tensor a = input({4, 4}), b = input({4, 1}, 0.5);
  auto [kernels, got] = run(a.sum({1}, true) + b);
  EXPECT_EQ(kernels, 1);
  const std::vector<double> ha = host(a), hb = host(b);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += ha[i * 4 + j];
    for (int j = 0; j < 1; ++j) want.push_back(s + hb[i]);
  }
  expect_near(got, want);
}

// tinygrad r_4_32_32: two parallel reductions in one kernel, each with its own REDUCE range.
TEST_P(KernelCounts, TwoSumsOfTwoInputs) {
  const Tensor x = input({4, 32}), y = input({4, 32}, 2);
  auto [kernels, got] = run(y.sum({-1}) + x.sum({-1}));
  EXPECT_EQ(kernels, 1);
  const std::vector<double> hx = host(x);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int j = 0; j < 32; ++j) s += hx[i * 32 + j];
    want.push_back(3 * s);
  }
  expect_near(got, want);
}

TEST_P(KernelCounts, SumPlusMax) {
  const Tensor x = input({4, 32}), y = input({4, 32}, 2);
  auto [kernels, got] = run(x.sum({-1}) + y.max({-1}));
  EXPECT_EQ(kernels, 1);
  const std::vector<double> hx = host(x), hy = host(y);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i) {
    double s = 0, m = -INFINITY;
    for (int j = 0; j < 32; ++j) s += hx[i * 32 + j], m = std::max(m, hy[i * 32 + j]);
    want.push_back(s + m);
  }
  expect_near(got, want);
  // one input read by both reductions (tinygrad: 1 kernel too)
  EXPECT_EQ(run(x.sum({-1}) + x.max({-1})).first, 1);
}

// Two matmuls added: tinygrad r_4_8_64_64.
TEST_P(KernelCounts, TwoMatmulsAdded) {
  const Tensor a = input({4, 64}), b = input({64, 8}, 0.25), c = input({4, 64}, 2),
               d = input({64, 8}, 0.5);
  auto [kernels, got] = run(a.matmul(b) + c.matmul(d));
  EXPECT_EQ(kernels, 1);
  const std::vector<double> ha = host(a), hb = host(b), hc = host(c), hd = host(d);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      double s = 0;
      for (int k = 0; k < 64; ++k)
        s += ha[i * 64 + k] * hb[k * 8 + j] + hc[i * 64 + k] * hd[k * 8 + j];
      want.push_back(s);
    }
  expect_near(got, want);
}

TEST_P(KernelCounts, MatmulRelu) {
  const Tensor x = input({4, 64}), w = input({64, 8}, -0.25);
  auto [kernels, got] = run((x.matmul(w) + 20).relu());
  EXPECT_EQ(kernels, 1);
  const std::vector<double> hx = host(x), hw = host(w);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      double s = 20;
      for (int k = 0; k < 64; ++k) s += hx[i * 64 + k] * hw[k * 8 + j];
      want.push_back(std::max(s, 0.0));
    }
  expect_near(got, want);
}

// A reduce followed by a broadcast back over its input realizes: 2 kernels each.
TEST_P(KernelCounts, ReduceThenBroadcastRealizes) {
  const Tensor a = input({4, 4});
  auto [k1, got] = run(a - a.sum({1}, true));
  EXPECT_EQ(k1, 2);
  const std::vector<double> ha = host(a);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += ha[i * 4 + j];
    for (int j = 0; j < 4; ++j) want.push_back(ha[i * 4 + j] - s);
  }
  expect_near(got, want);
  // tinygrad's a - a.sum(1) broadcasts the (4,) sum along the rows
  EXPECT_EQ(run(a - a.sum({1})).first, 2);
  EXPECT_EQ(run(a - a.mean({0}, true)).first, 2);
  const Tensor x = input({4, 32});
  auto [k2, sd] = run(x.std({-1}));
  EXPECT_EQ(k2, 2);
  const std::vector<double> hx = host(x);
  for (int i = 0; i < 4; ++i) {
    double m = 0, v = 0;
    for (int j = 0; j < 32; ++j) m += hx[i * 32 + j] / 32;
    for (int j = 0; j < 32; ++j) v += (hx[i * 32 + j] - m) * (hx[i * 32 + j] - m) / 31;
    EXPECT_NEAR(sd[static_cast<size_t>(i)], std::sqrt(v), 1e-4);
  }
}

// tinygrad r_16_16: a sum with no axis left to realize is recomputed for every element.
TEST_P(KernelCounts, ScalarSumIsRecomputed) {
  const Tensor x = input({16});
  auto [kernels, got] = run(x - x.sum());
  EXPECT_EQ(kernels, 1);
  const std::vector<double> hx = host(x);
  double s = 0;
  for (double v : hx) s += v;
  std::vector<double> want;
  for (double v : hx) want.push_back(v - s);
  expect_near(got, want);
}

TEST_P(KernelCounts, SoftmaxAndLayernorm) {
  const Tensor x = input({4, 32}, 0.1);
  auto [k1, got] = run(x.softmax(-1));
  EXPECT_EQ(k1, 3);
  const std::vector<double> hx = host(x);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < 32; ++j) m = std::max(m, hx[i * 32 + j]);
    for (int j = 0; j < 32; ++j) s += std::exp(hx[i * 32 + j] - m);
    for (int j = 0; j < 32; ++j) want.push_back(std::exp(hx[i * 32 + j] - m) / s);
  }
  expect_near(got, want);
  // layernorm as tinygrad composes it, over the last axis and over axes (1, 2, 3)
  const Tensor t = input({20, 5, 10, 10}, 0.1);
  for (const std::vector<int>& axes : {std::vector<int>{-1}, std::vector<int>{1, 2, 3}}) {
    const Tensor y = t - t.mean(axes, true);
    auto [k, ln] = run(y * ((y * y).mean(axes, true) + 1e-5).rsqrt());
    EXPECT_EQ(k, 3);
    // every normalized group has mean 0
    const int64_t group = axes.size() == 1 ? 10 : 500;
    for (int64_t g = 0; g < 10000 / group; g += 7) {
      double m = 0;
      for (int64_t j = 0; j < group; ++j) m += ln[static_cast<size_t>(g * group + j)];
      EXPECT_NEAR(m / static_cast<double>(group), 0, 1e-4);
    }
  }
}

// A value read at two indexes is recomputed by its readers when it reads at most 3 buffers
// (tinygrad's remove_bufferize cost model), else it gets a kernel of its own.
TEST_P(KernelCounts, SharedValueRecomputedOrRealized) {
  const Tensor a = input({16}, 0.1), b = input({16}, 0.2), c = input({16}, 0.3),
               d = input({16}, 0.4);
  const Tensor e = (a + b + c).exp();
  auto [k3, got] = run(e.shrink({{1, 16}}) + e.shrink({{0, 15}}));
  EXPECT_EQ(k3, 1);
  const std::vector<double> he = host(e);
  std::vector<double> want;
  for (int i = 0; i < 15; ++i)
    want.push_back(he[static_cast<size_t>(i + 1)] + he[static_cast<size_t>(i)]);
  expect_near(got, want);
  const Tensor e4 = (a + b + c + d).exp();
  auto [k4, got4] = run(e4.shrink({{1, 16}}) + e4.shrink({{0, 15}}));
  EXPECT_EQ(k4, 2);
  const std::vector<double> he4 = host(e4);
  for (int i = 0; i < 15; ++i)
    EXPECT_NEAR(got4[static_cast<size_t>(i)],
                he4[static_cast<size_t>(i + 1)] + he4[static_cast<size_t>(i)], 1e-4);
}

// A REDUCE read at two different indexes is realized: 2 kernels each.
TEST_P(KernelCounts, ReduceReadTwice) {
  const Tensor a = input({16, 16});
  const Tensor s = a.sum({1});
  auto [k1, got] = run(s.shrink({{1, 16}}) + s.shrink({{0, 15}}));
  EXPECT_EQ(k1, 2);
  const std::vector<double> hs = host(s);
  for (int i = 0; i < 15; ++i)
    EXPECT_NEAR(got[static_cast<size_t>(i)],
                hs[static_cast<size_t>(i + 1)] + hs[static_cast<size_t>(i)], 1e-3);
  const Tensor m = a.matmul(a);
  auto [k2, got2] = run(m.transpose() + m);
  EXPECT_EQ(k2, 2);
  const std::vector<double> hm = host(m);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      EXPECT_NEAR(got2[static_cast<size_t>(i * 16 + j)],
                  hm[static_cast<size_t>(j * 16 + i)] + hm[static_cast<size_t>(i * 16 + j)], 1e-2);
}

// A sum over a broadcast of one element: the REDUCE collapses to a multiply (tinygrad: one kernel,
// `E`, no REDUCE left).
TEST_P(KernelCounts, SumOfABroadcastCollapses) {
  const Tensor x = Tensor::from_vector(std::vector<float>{2}, {1}).realize();
  auto [kernels, got] = run(x.reshape({1, 1}).expand({256, 256}).sum());
  EXPECT_EQ(kernels, 1);
  expect_near(got, {131072});
  ASSERT_EQ(last_kernel_asts().size(), 1u);
  for (const UOp& u : toposort(last_kernel_asts()[0])) EXPECT_NE(u.op(), Op::Reduce);
}

TEST_P(KernelCounts, ReshapedSumAndReuse) {
  auto [k1, got] = run(Tensor::arange(6).cast(dtypes::float32).reshape({3, 2}).sum({1}));
  EXPECT_EQ(k1, 1);
  expect_near(got, {1, 5, 9});
  // one sum realized as two reshapes of it: one kernel (the second output is a view)
  Tensor x = input({16, 16}).sum({1});
  Tensor v1 = x.reshape({4, 4}), v2 = x.reshape({16, 1, 1});
  Tensor::realize_all({&v1, &v2});
  EXPECT_EQ(last_kernel_count(), 1);
  const std::vector<float> sums = v1.data<float>();
  EXPECT_EQ(v2.data<float>(), sums);
  const std::vector<double> h = host(input({16, 16}));
  for (int i = 0; i < 16; ++i) {
    double s = 0;
    for (int j = 0; j < 16; ++j) s += h[static_cast<size_t>(i * 16 + j)];
    EXPECT_NEAR(sums[static_cast<size_t>(i)], s, 1e-4) << i;
  }
}

// A collapsed half sum scales by each size in turn: 256 x 256 copies of 1/1024 sum to 64, where
// the product of the sizes (65536) alone would overflow a half. (The sum reads a cast of the
// broadcast, no view of it, so the reduction is split first: 2 kernels, as tinygrad.)
TEST_P(KernelCounts, CollapsedHalfSumDoesNotOverflow) {
  const Tensor x =
      Tensor::from_vector(std::vector<float>{1.0f / 1024}, {1}).cast(dtypes::float16).realize();
  Tensor s = x.reshape({1, 1}).expand({256, 256}).sum().cast(dtypes::float32);
  s.realize();
  EXPECT_EQ(last_kernel_count(), 2);
  EXPECT_EQ(s.data<float>(), std::vector<float>{64.0f});
}

// An assignment whose value reads its target and holds a REDUCE over a buffer: the value is
// computed first (the realize map realizes it, and the cost model keeps it), then stored; 2
// kernels, as tinygrad. The value's kernel fuses two matmul REDUCEs with their epilogue.
TEST_P(KernelCounts, AssignedValueWithAReduceReadingTheTarget) {
  Tensor x = input({4, 8}, 0.5);
  const Tensor a = input({4, 16}), b = input({16, 8}, 0.25);
  const std::vector<double> hx = host(x), ha = host(a), hb = host(b);
  x.assign(x + a.matmul(b) + a.matmul(b).relu());
  x.realize();
  EXPECT_EQ(last_kernel_count(), 2);
  const std::vector<float> got = x.data<float>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      double m = 0;
      for (int k = 0; k < 16; ++k)
        m += ha[static_cast<size_t>(i * 16 + k)] * hb[static_cast<size_t>(k * 8 + j)];
      EXPECT_NEAR(got[static_cast<size_t>(i * 8 + j)], hx[static_cast<size_t>(i * 8 + j)] + 2 * m,
                  1e-3);
    }
}

// More of tinygrad's counts (counts.py): each program's values equal the same program computed
// with every intermediate realized first (another cut of the same graph).
TEST_P(KernelCounts, MoreProgramsAsTinygrad) {
  const Tensor a = input({8, 8}), v = input({16}), w = input({8, 16});
  auto r = [](Tensor t, bool cut) { return cut ? t.contiguous() : t; };
  const std::vector<Case> cases = {
      {"(a+1).contiguous()*2", [&](bool) { return (v + 1).contiguous() * 2; }, 2},
      {"(a.sum(1,keepdim)*a).sum(1)", [&](bool c) { return (r(a.sum({1}, true), c) * a).sum({1}); },
       2},
      {"a.sum(0)+a.sum(1)", [&](bool c) { return r(a.sum({0}), c) + r(a.sum({1}), c); }, 1},
      {"a.T.contiguous()", [&](bool) { return w.transpose().contiguous(); }, 1},
      {"a.pad(1,1)+1",
       [&](bool c) {
         return r(v.pad({{1, 1}}), c) + 1;
       },
       1},
      {"a.cat(b)",
       [&](bool c) {
         return Tensor::cat({r(v * 2, c), r(v + 1, c)});
       },
       1},
      {"((x@w1).relu())@w2", [&](bool c) { return r(a.matmul(a).relu(), c).matmul(w); }, 2},
      {"x.reshape(4,4).sum()+x.reshape(16,1,1).sum()",
       [&](bool c) {
         const Tensor x = r(input({16, 16}).sum({1}), c);
         return x.reshape({4, 4}).sum() + x.reshape({16, 1, 1}).sum();
       },
       2},
  };
  // two reductions of one input as two outputs: no multi-output kernels, 2
  Tensor s1 = a.sum({1}), s2 = a.max({1});
  Tensor::realize_all({&s1, &s2});
  EXPECT_EQ(last_kernel_count(), 2);
  expect_counts(cases);
}

// A realized view of a computed value realizes the value and views its buffer, as tinygrad
// realizes bases: a transpose keeps the value's layout (tinygrad's E_32_4 for (a+1).T of 8x16,
// was E_16_2_4 writing the transposed layout), an expand stores no repeats (E_4, was E_4_2_4), a
// pad no zeros (E_4_4, was E_5_4), also where a function returns the view. A shrink is computed
// itself (tinygrad computes the whole value: docs/tinygrad-differences.md). The view reads as the
// view and takes assignments like any view of a buffer.
TEST_P(KernelCounts, ARealizedViewOfAComputedValueViewsItsBuffer) {
  const Tensor a = input({8, 16}), v = input({16}), c = input({4, 1});
  const std::vector<double> av = host(a), vv = host(v), cv = host(c);
  struct View {
    Tensor t;
    const char* name;
    std::vector<double> want;
  };
  std::vector<double> transposed, expanded, padded, shrunk;
  for (size_t j = 0; j < 16; ++j)
    for (size_t i = 0; i < 8; ++i) transposed.push_back(av[i * 16 + j] + 1);
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 8; ++j) expanded.push_back(cv[i] + 1);
  for (size_t i = 0; i < 20; ++i) padded.push_back(i >= 2 && i < 18 ? vv[i - 2] + 1 : 0.0);
  for (size_t i = 2; i < 5; ++i) shrunk.push_back(vv[i] + 1);
  std::vector<View> views = {{(a + 1).transpose(), "E_32_4", transposed},
                             {(c + 1).expand({4, 8}), "E_4", expanded},
                             {(v + 1).pad({{2, 2}}), "E_4_4", padded},
                             {(v + 1).shrink({{2, 5}}), "E_3", shrunk}};
  for (View& view : views) {
    view.t.realize();
    EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{view.name}));
    expect_near(view.t.data<float>(), view.want);
  }
  (c * 3).expand({4, 8}).realize();
  EXPECT_EQ(last_kernel_outputs(), (std::vector<int64_t>{4}));
  // a value and its flip realized together: one kernel, both views of its buffer; with a shrink
  // of it, two
  Tensor s = a.sum({1}), flipped = s.flip({0}), shrunk_sum = s.shrink({{1, 4}});
  Tensor::realize_all({&s, &flipped});
  EXPECT_EQ(last_kernel_count(), 1);
  const std::vector<float> sv = s.data<float>(), fv = flipped.data<float>();
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(fv[i], sv[7 - i]) << i;
  Tensor s2 = a.sum({1});
  Tensor::realize_all({&s2, &shrunk_sum});
  EXPECT_EQ(last_kernel_count(), 2);
  // a view a function returns is a view too: a grouped conv2d's reshape of its sum realizes the
  // sum in its own shape, groups and channels as two loops (tinygrad's r_4_2_6_6_2_3_3 with and
  // without opts; was r_8_6_6_2_3_3), with the values of the same conv computed contiguous (one
  // loop of 8)
  const Tensor x = input({1, 8, 8, 8}), wg = input({8, 2, 3, 3}, 0.5);
  ConvOptions groups;
  groups.groups = 4;
  Tensor conv = x.conv2d(wg, nullptr, groups);
  {
    const ScopedEnv noopt("NOOPT", "1");  // (a GPU-shaped INTERP's workgroups rename it)
    conv.realize();
  }
  EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{"r_4_2_6_6_2_3_3"}));
  Tensor contiguous = x.conv2d(wg, nullptr, groups).contiguous();
  std::vector<double> want;
  for (float f : contiguous.data<float>()) want.push_back(f);
  expect_near(conv.data<float>(), want);
  // an assignment through the realized transpose writes the value's buffer
  Tensor t = views[0].t;
  t.assign(t * 2).realize();
  std::vector<double> doubled;
  for (double x : transposed) doubled.push_back(2 * x);
  expect_near(t.data<float>(), doubled);
  // (also through a transpose of an input's buffer)
  Tensor w = input({4, 3}), wt = w.transpose();
  const std::vector<double> wv = host(w);
  wt.assign(wt + 1).realize();
  std::vector<double> incremented;
  for (double x : wv) incremented.push_back(x + 1);
  expect_near(w.data<float>(), incremented);
}

// A reduction over axes of size 1 is a reshape, as tinygrad's (its REDUCE never runs over a size-1
// axis): realized from a buffer it runs no kernel; mixed with longer axes, only those reduce.
TEST_P(KernelCounts, SizeOneAxesAreNotReduced) {
  const Tensor col = input({4, 1}), one = input({1});
  for (Op op : {Op::Add, Op::Max, Op::Mul}) {
    Tensor r = op == Op::Add ? col.sum({1}) : op == Op::Max ? col.max({1}) : col.prod({1});
    EXPECT_EQ(r.shape(), (Dims{4}));
    auto [kernels, got] = run(r);
    EXPECT_EQ(kernels, 0) << op_name(op);
    expect_near(got, host(col));
  }
  Tensor kept = col.sum({1}, true);
  EXPECT_EQ(kept.shape(), (Dims{4, 1}));
  EXPECT_EQ(run(kept).first, 0);
  EXPECT_EQ(run(one.sum()).first, 0);
  expect_near(run(one.sum()).second, host(one));
  // (4, 1, 3) over axes 1 and 2: one reduction over the 3 (tinygrad's r_4_3)
  const Tensor x = input({4, 1, 3});
  Tensor both = x.sum({1, 2});
  auto [kernels, got] = run(both);
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{"r_4_3"}));
  std::vector<double> want;
  const std::vector<double> xv = host(x);
  for (size_t i = 0; i < 4; ++i) want.push_back(xv[i * 3] + xv[i * 3 + 1] + xv[i * 3 + 2]);
  expect_near(got, want);
}

// tinygrad's counts for more programs (/work/notes/issue13-tg/counts2.py, counts2.txt), values
// checked against another cut of the same graph.
TEST_P(KernelCounts, ReductionProgramsAsTinygrad) {
  const Tensor x = input({4, 8}), v = input({16}), u = input({16}, 0.5), m = input({8, 8}),
               m2 = input({8, 8}, 0.25), m3 = input({8, 8}, 2), t = input({8, 16});
  auto r = [](Tensor a, bool cut) { return cut ? a.contiguous() : a; };
  const std::vector<Case> cases = {
      {"x.sum(0).sum(0)", [&](bool c) { return r(t.sum({0}), c).sum({0}); }, 1},
      {"(a+b).sum()+(a*b).sum()", [&](bool c) { return r((v + u).sum(), c) + r((v * u).sum(), c); },
       1},
      {"(x-x.max(1,keepdim)).exp()", [&](bool) { return (x - x.max({1}, true)).exp(); }, 2},
      {"x.log_softmax(-1)", [&](bool) { return x.log_softmax(-1); }, 3},
      {"x.var(-1)", [&](bool) { return x.var({-1}); }, 2},
      {"x.pad(((1,1),(0,0))).sum(0)",
       [&](bool c) {
         return r(x.pad({{1, 1}, {0, 0}}), c).sum({0});
       },
       1},
      {"(a@b).T@c", [&](bool) { return m.matmul(m2).transpose().matmul(m3); }, 2},
      {"a.sum(1)[:, None] * a", [&](bool) { return x.sum({1}).unsqueeze(1) * x; }, 2},
      {"x.mean() + x.max()", [&](bool c) { return r(v.mean(), c) + r(v.max(), c); }, 1},
      {"(x*2).sum(1) + (x*3).sum(1)",
       [&](bool c) { return r((x * 2).sum({1}), c) + r((x * 3).sum({1}), c); }, 1},
      {"x.sum(1).max()", [&](bool c) { return r(x.sum({1}), c).max(); }, 1},
      {"((x+1).sum(1,keepdim)+x).sum(1)",
       [&](bool) { return ((x + 1).sum({1}, true) + x).sum({1}); }, 2},
      {"e=(a*b).exp(); e.sum()+e.max()",
       [&](bool c) {
         const Tensor e = r((v * u).exp(), c);
         return e.sum() + e.max();
       },
       1},
      {"x.flip(0)+x", [&](bool) { return v.flip({0}) + v; }, 1},
      {"x.reshape(4,4).T.sum(1)",
       [&](bool) {
         return v.reshape({4, 4}).transpose().sum({1});
       },
       1},
  };
  expect_counts(cases);
  // a reduce read by two outputs at its own shape is realized once: 3 kernels
  const Tensor s = x.sum({1}, true);
  Tensor o1 = s + 1, o2 = s * 2;
  Tensor::realize_all({&o1, &o2});
  EXPECT_EQ(last_kernel_count(), 3);
}

// Two shifted views of a value that reads four buffers (too costly to recompute) differ on one
// axis only; tinygrad (NOOPT=1) still realizes the whole value, then reads it: 2 kernels, as here.
// A broadcast row sum shifted the same way: r_4_8 then E_4_7. The 4x8 and 3x8 elementwise kernels
// are E_32 and E_24 (adjacent loops merge, even under NOOPT), as tinygrad names them.
TEST_P(KernelCounts, ShiftedViewsOfACostlyValueRealizeIt) {
  const Tensor a = input({4, 8}), b = input({4, 8}, 2), c = input({4, 8}, 3), d = input({4, 8}, 4);
  auto costly = [&](bool cut) {
    const Tensor x = (a + b * 2 + c * 3 + d * 4) * 0.01;
    return cut ? Tensor(x).realize() : x;
  };
  auto row_sum = [&](bool cut) {
    const Tensor r = (a * b).sum({1}, true).expand({4, 8}) + c;
    return cut ? Tensor(r).realize() : r;
  };
  const std::vector<std::pair<Case, std::vector<std::string>>> cases = {
      {{"x[:,1:]+x[:,:-1]",
        [&](bool cut) {
          const Tensor x = costly(cut);
          return x.shrink({{0, 4}, {1, 8}}) + x.shrink({{0, 4}, {0, 7}});
        },
        2},
       {"E_32", "E_4_7"}},
      {{"x[1:]+x[:-1]",
        [&](bool cut) {
          const Tensor x = costly(cut);
          return x.shrink({{1, 4}, {0, 8}}) + x.shrink({{0, 3}, {0, 8}});
        },
        2},
       {"E_32", "E_24"}},
      {{"r[:,1:]+r[:,:-1]",
        [&](bool cut) {
          const Tensor r = row_sum(cut);
          return r.shrink({{0, 4}, {1, 8}}) + r.shrink({{0, 4}, {0, 7}});
        },
        2},
       {"r_4_8", "E_4_7"}},
  };
  for (const auto& [k, names] : cases) {
    expect_counts({k});
    const ScopedEnv noopt("NOOPT", "1");  // the names before opts, as tinygrad's NOOPT=1 gives
    (void)k.build(false).realize();
    EXPECT_EQ(last_kernel_names(), names) << k.name;
  }
}

// DEBUG=2 names each kernel as tinygrad does (E_ or r_, then the sizes of its loops, outputs
// first), before any opt (checked with tinygrad's NOOPT=1 DEBUG=2): `a.sum(1, keepdim) + b` over
// 4x4 is one kernel r_4_4, and a softmax over 4x32 is r_4_32 (max), r_4_32 (sum of exps) and
// E_4_32.
TEST_P(KernelCounts, Debug2PrintsTinygradKernelNames) {
  const Tensor a = input({4, 4}), b = input({4, 1}), x = input({4, 32}, 0.1);
  const ScopedEnv noopt("NOOPT", "1");
  setenv("DEBUG", "2", 1);
  testing::internal::CaptureStderr();
  Tensor y = a.sum({1}, true) + b;
  y.realize();
  Tensor z = x.softmax(-1);
  z.realize();
  const std::string err = testing::internal::GetCapturedStderr();
  unsetenv("DEBUG");
  const std::string on = " on " + GetParam() + ": ";
  for (const char* line :
       {"kernel 1 r_4_4", "kernel 1 r_4_32", "kernel 2 r_4_32", "kernel 3 E_4_32"})
    EXPECT_NE(err.find(line + on), std::string::npos) << line << " in\n" << err;
}

// tinygrad's split_reduceop (on by default): a reduction of at least 32768 elements into each
// output splits one reduced, not broadcast, axis by the first of 256..8 that divides it, into a
// kernel of partial results and one that reduces them; the first may split again. Counts measured
// with tinygrad a9069c17 at its defaults.
// Loops merge as tinygrad's do once the kernel's index terms are distributed (its "initial
// symbolic"): a 2x2 pool of (4, 16, 16) indexes its input with c*256 + (y*2 + ky)*16, which
// becomes c*256 + y*32 + ky*16, so c and y run as one loop of 32 (tinygrad's r_32_8_2_2; it was
// r_4_8_8_2_2). Values against the pool computed by hand.
TEST_P(KernelCounts, PoolLoopsMergeAsTinygrad) {
  const Tensor x = input({1, 4, 16, 16}, 0.5);
  const std::vector<double> xv = host(x);
  std::vector<double> want;
  for (int c = 0; c < 4; ++c)
    for (int y = 0; y < 8; ++y)
      for (int z = 0; z < 8; ++z) {
        double m = -1e30;
        for (int ky = 0; ky < 2; ++ky)
          for (int kx = 0; kx < 2; ++kx)
            m = std::max(m, xv[static_cast<size_t>(c * 256 + (y * 2 + ky) * 16 + z * 2 + kx)]);
        want.push_back(m);
      }
  // the names without opts (the loops as merged), and with the CPU's (tinygrad's CPU names); an
  // INTERP run may take a GPU's shape (INTERP_TARGET), whose workgroups rename the kernel
  for (const char* no_opts : {"1", "0"}) {
    const ScopedEnv noopt("NOOPT", no_opts);
    const std::vector<std::string> merged = {"r_32_8_2_2"};
    const bool named = no_opts[0] == '1' || GetParam() == "CPU";
    auto [kernels, got] = run(x.max_pool2d());
    EXPECT_EQ(kernels, 1);
    if (named) EXPECT_EQ(last_kernel_names(), merged);
    expect_near(got, want);
    std::tie(kernels, got) = run(x.reshape({4, 8, 2, 8, 2}).max({2, 4}));
    if (named) EXPECT_EQ(last_kernel_names(), merged);
    expect_near(got, want);
  }
}

// An arange is tinygrad's scan of steps, and reduce collapse (rules/collapse.rw) folds the scan to
// the loop index: one elementwise kernel (E_, no reduce loop) and no buffer read for it.
TEST_P(KernelCounts, ArangeIsItsLoopIndex) {
  const ScopedEnv noopt("NOOPT", "1");
  struct Span {
    int64_t start, stop, step;
    DType dtype;
  };
  for (const Span& a : {Span{0, 10, 1, dtypes::int32}, Span{5, 40, 3, dtypes::int32},
                        Span{7, -20, -4, dtypes::int32}, Span{-3, 1000, 1, dtypes::int64},
                        Span{2, 9, 2, dtypes::float32}, Span{0, 600, 1, dtypes::int32}}) {
    Tensor t = Tensor::arange(a.start, a.stop, a.step, a.dtype);
    const std::vector<double> got = t.to_doubles();
    const std::string what = fmt::format("arange({}, {}, {})", a.start, a.stop, a.step);
    std::vector<double> want;
    for (int64_t v = a.start; a.step > 0 ? v < a.stop : v > a.stop; v += a.step)
      want.push_back(static_cast<double>(v));
    EXPECT_EQ(got, want) << what;
    EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{fmt::format("E_{}", want.size())}))
        << what;
  }
  // partial sums beyond the dtype (4 * 2^30 in int32): the values still fit, made on the host
  const std::vector<double> wide =
      Tensor::arange(-2147483647 - 1, 2147483647, int64_t{1} << 30).to_doubles();
  EXPECT_EQ(wide, (std::vector<double>{-2147483648.0, -1073741824.0, 0.0, 1073741824.0}));
  // a one-hot and a gather by an arange read no arange buffer; their values
  const Tensor idx = Tensor::from_vector(std::vector<int32_t>{3, 0, 2, -1}, {4}, dtypes::int32);
  EXPECT_EQ(idx.one_hot(4).to_doubles(),
            (std::vector<double>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}));  // -1: none
  const Tensor table = input({4, 3});
  const std::vector<double> tv = host(table);
  std::vector<double> rows;
  for (int r : {3, 0, 2, 3})
    for (int c = 0; c < 3; ++c) rows.push_back(tv[static_cast<size_t>(r * 3 + c)]);
  auto [kernels, got] = run(table[idx]);
  EXPECT_EQ(kernels, 1);
  expect_near(got, rows);
}

// Indexing by a tensor is a sum over the indexed axis of the element where the axis equals the
// index; load collapse (rules/collapse.rw, tinygrad's pm_load_collapse) makes it one read at the
// index, gated to the axis (an index outside reads 0; a negative one counts from the end first):
// tinygrad's E_8_4 for eight rows of a (10, 4) table, no loop over the 10.
TEST_P(KernelCounts, GatherCollapsesToOneRead) {
  const ScopedEnv noopt("NOOPT", "1");
  const Tensor table = input({10, 4});
  const std::vector<double> tv = host(table);
  const std::vector<int32_t> iv = {3, -1, 9, 12, -11, 0, 5, 7};
  const Tensor idx = Tensor::from_vector(iv, {8}, dtypes::int32).realize();
  std::vector<double> want;
  for (int32_t i : iv) {
    const int32_t row = i < 0 ? i + 10 : i;
    for (int c = 0; c < 4; ++c)
      want.push_back(row >= 0 && row < 10 ? tv[static_cast<size_t>(row * 4 + c)] : 0.0);
  }
  auto [kernels, got] = run(table[idx]);
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{"E_8_4"}));
  expect_near(got, want);
  // gather along the rows: the same read, by an index per element (gather and one_hot do not
  // count a negative index from the end: -1 is no row)
  std::vector<double> unwrapped;
  for (int32_t i : iv)
    for (int c = 0; c < 4; ++c)
      unwrapped.push_back(i >= 0 && i < 10 ? tv[static_cast<size_t>(i * 4 + c)] : 0.0);
  std::tie(kernels, got) = run(table.gather(0, idx.reshape({8, 1}).expand({8, 4})));
  EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{"E_8_4"}));
  expect_near(got, unwrapped);
  // along the columns of each row (an index per row, within 0..3)
  Tensor cols = Tensor::from_vector(std::vector<int32_t>{3, 0, 2, 1, 1, 0, 3, 2, 0, 3}, {10, 1},
                                    dtypes::int32);
  std::tie(kernels, got) = run(table.gather(1, cols));
  EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{"E_10"}));
  const std::vector<double> cv = cols.to_doubles();
  std::vector<double> picked;
  for (size_t r = 0; r < 10; ++r) picked.push_back(tv[r * 4 + static_cast<size_t>(cv[r])]);
  expect_near(got, picked);
  // with the target's opts the lanes of a row read as one vector under the row's gate (rows of
  // 8: rules/devectorizer.rw's gated runs); rows outside the table read 0
  const Tensor wide = input({10, 8});
  const std::vector<double> wv = host(wide);
  std::vector<double> rows;
  for (int32_t i : iv) {
    const int32_t row = i < 0 ? i + 10 : i;
    for (int c = 0; c < 8; ++c)
      rows.push_back(row >= 0 && row < 10 ? wv[static_cast<size_t>(row * 8 + c)] : 0.0);
  }
  {
    const ScopedEnv opts("NOOPT", "0");
    std::tie(kernels, got) = run(wide[idx]);
    EXPECT_EQ(kernels, 1);
    expect_near(got, rows);
  }
  // a sum the index does not pick from keeps its loop: a one-hot times a row, summed over the
  // row's axis with the one-hot's columns from memory (no arange) is no gather
  const Tensor hot = idx.one_hot(10).cast(dtypes::float32).realize();
  std::tie(kernels, got) = run((hot.reshape({8, 10, 1}) * table.reshape({1, 10, 4})).sum({1}));
  EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{"r_8_4_10"}));
  expect_near(got, unwrapped);
}

// A loop the kernel takes modulo a constant that divides it runs as two (tinygrad's
// pm_split_ranges): a repeat's output loops, 8 = 2 copies x 4 rows and 24 = 3 x 8 columns, index
// the input with r % 4 and r % 8, so they split; tinygrad's E_2_4_3_8 without opts and
// E_2_4_3_2_4 with the CPU's (was E_8_24 and E_8_6_4).
TEST_P(KernelCounts, LoopsTakenModuloSplitAsTinygrad) {
  const Tensor x = input({4, 8});
  const std::vector<double> xv = host(x);
  std::vector<double> want;
  for (size_t i = 0; i < 8; ++i)
    for (size_t j = 0; j < 24; ++j) want.push_back(xv[(i % 4) * 8 + j % 8]);
  for (const char* no_opts : {"1", "0"}) {
    const ScopedEnv noopt("NOOPT", no_opts);
    auto [kernels, got] = run(x.repeat({2, 3}).contiguous());
    EXPECT_EQ(kernels, 1);
    if (no_opts[0] == '1')
      EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{"E_2_4_3_8"}));
    else if (GetParam() == "CPU")
      EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{"E_2_4_3_2_4"}));
    expect_near(got, want);
  }
}

TEST_P(KernelCounts, LargeReductionsSplitAsTinygrad) {
  auto sum_of = [](Tensor t) {
    double s = 0;
    for (float f : t.data<float>()) s += f;
    return s;
  };
  Tensor v = input({32768}), w = input({32767}), m = input({256, 256});
  Tensor wide = input({2, 65536}), odd = input({3 * 7 * 11 * 13 * 17}, 0.01);
  Tensor cube = input({64, 64, 16}), row = input({1, 256}), one = input({1, 1});
  struct Split {
    const char* name;
    Tensor out;
    int kernels;
    std::vector<double> want;
  };
  std::vector<double> cols(256, 0), rows(256, 0), lanes(16, 0), wide_max(2, 0);
  const std::vector<float> hm = m.data<float>(), hc = cube.data<float>(), hw = wide.data<float>();
  for (int i = 0; i < 256; ++i)
    for (int j = 0; j < 256; ++j) {
      cols[j] += hm[i * 256 + j];
      rows[i] += hm[i * 256 + j];
    }
  for (size_t k = 0; k < hc.size(); ++k) lanes[k % 16] += hc[k];
  for (size_t k = 0; k < hw.size(); ++k)
    wide_max[k / 65536] = std::max<double>(wide_max[k / 65536], hw[k]);
  const std::vector<float> hr = row.data<float>();
  double row_total = 0;
  std::vector<double> row_sums;  // each column of the broadcast: 256 copies of the row's element
  for (float f : hr) {
    row_total += f;
    row_sums.push_back(256.0 * f);
  }
  const std::vector<Split> cases = {
      {"32768 elements", v.sum(), 2, {sum_of(v)}},
      {"32767 elements", w.sum(), 1, {sum_of(w)}},
      {"256x256 all", m.sum(), 2, {sum_of(m)}},
      {"256x256 axis 0", m.sum({0}), 1, cols},
      {"256x256 axis 1", m.sum({1}), 1, rows},
      {"2x65536 max of rows", wide.max({1}), 2, wide_max},
      {"51051 = 231 x 221", odd.sum(), 2, {sum_of(odd)}},
      {"64x64x16 axes 0, 1 (4096 per output)", cube.sum({0, 1}), 1, lanes},
      {"row broadcast to 256x256", row.expand({256, 256}).sum(), 2, {256 * row_total}},
      {"row broadcast, axis 0", row.expand({256, 256}).sum({0}), 1, row_sums},
      {"scalar broadcast (nothing to split)", one.expand({256, 256}).sum(), 1, {65536.0}},
      {"scalar broadcast times 2", (one.expand({256, 256}) * 2).sum(), 2, {131072.0}},
  };
  for (const Split& c : cases) {
    auto [kernels, got] = run(c.out);
    EXPECT_EQ(kernels, c.kernels) << c.name;
    expect_near(got, c.want);
  }
  const Tensor ones = Tensor::full({65536}, 1.0).contiguous().realize();
  EXPECT_EQ(run(ones.prod()).first, 2);
  {
    ScopedEnv off("SPLIT_REDUCEOP", "0");
    EXPECT_EQ(run(ones.sum()).first, 1);
  }
  {  // tinygrad: 3 kernels for 2^20 elements at a threshold of 1024 (the first part splits again)
    ScopedEnv low("REDUCEOP_SPLIT_THRESHOLD", "1024");
    Tensor big = input({1 << 20});
    auto [kernels, got] = run(big.sum());
    EXPECT_EQ(kernels, 3);
    expect_near(got, {sum_of(big)});
  }
  {  // a threshold below 256: never split by a whole axis (the same reduction again, forever)
    ScopedEnv lowest("REDUCEOP_SPLIT_THRESHOLD", "2");
    auto [kernels, got] = run(v.sum());
    EXPECT_GE(kernels, 2);
    expect_near(got, {sum_of(v)});
  }
}

// Cache blocking (tinyrw's, rules/rangeify.rw): a contraction whose operand broadcast along an
// output axis spans more than REDUCE_BLOCK_BYTES between two reads runs as two kernels, the
// reduced axis split into blocks outermost, then a sum of the blocks' partial results.
TEST_P(KernelCounts, LargeContractionsSplitIntoCacheBlocks) {
  if (GetParam() != "INTERP" && GetParam() != "CPU")
    GTEST_SKIP() << GetParam() << ": cache blocking is for host devices (CPU and INTERP)";
  // the blocks' counts alone (operand packing adds a kernel per packed operand)
  const ScopedEnv no_packing("PACK_OPERAND_BYTES", "0");
  Tensor a = input({16, 512}, 0.01), b = input({512, 16}, 0.02), row = input({1, 512}, 0.01);
  Tensor ba = input({2, 16, 512}, 0.01), bb = input({2, 512, 16}, 0.02);
  Tensor short_a = input({16, 128}, 0.01), short_b = input({128, 64}, 0.02);
  const std::vector<double> ab = matmul_ref(a, b, 1, 16, 512, 16);
  {
    // b's span between two reads (512 x 16 floats, 32 KiB) in blocks of at most 8 KiB: 4 blocks
    // of 128, then their sum (the names without opts show the shapes)
    const ScopedEnv small("REDUCE_BLOCK_BYTES", "8192");
    auto [kernels, got] = run(a.matmul(b));
    EXPECT_EQ(kernels, 2);
    expect_near(got, ab);
    {
      const ScopedEnv no_opts("NOOPT", "1");
      std::tie(kernels, got) = run(a.matmul(b));
      EXPECT_EQ(last_kernel_names(), (std::vector<std::string>{"r_4_16_16_128", "r_256_4"}));
      expect_near(got, ab);
    }
    // a batched matmul: each batch's b spans 32 KiB
    std::tie(kernels, got) = run(ba.matmul(bb));
    EXPECT_EQ(kernels, 2);
    expect_near(got, matmul_ref(ba, bb, 2, 16, 512, 16));
    // nothing read again: a row times a matrix (b is read once), a product of two tensors
    // summed over an axis
    std::tie(kernels, got) = run(row.matmul(b));
    EXPECT_EQ(kernels, 1);
    expect_near(got, matmul_ref(row, b, 1, 1, 512, 16));
    std::tie(kernels, got) = run((b * b).sum({0}));
    EXPECT_EQ(kernels, 1);
    std::vector<double> columns(16, 0);
    const std::vector<float> hb = b.data<float>();
    for (size_t e = 0; e < hb.size(); ++e) columns[e % 16] += double{hb[e]} * hb[e];
    expect_near(got, columns);
    // blocks shorter than 128: b spans 32 KiB, but 128 products split in two are too few
    std::tie(kernels, got) = run(short_a.matmul(short_b));
    EXPECT_EQ(kernels, 1);
    expect_near(got, matmul_ref(short_a, short_b, 1, 16, 128, 64));
    // the relu after the contraction joins the second kernel
    std::tie(kernels, got) = run(a.matmul(b).relu());
    EXPECT_EQ(kernels, 2);
    expect_near(got, ab);  // every element of a and b is positive
  }
  {
    const ScopedEnv off("REDUCE_BLOCK_BYTES", "0");
    auto [kernels, got] = run(a.matmul(b));
    EXPECT_EQ(kernels, 1);
    expect_near(got, ab);
  }
  // at the default (1 MiB) 512 x 512 stays one kernel (b spans 1 MiB: tinygrad's
  // r_128_128_4_4_128_4 on the CPU) and 1024 x 1024 splits into 4 blocks of 256
  if (GetParam() != "CPU") return;
  Tensor x = input({1024, 1024}, 0.001), y = input({1024, 1024}, 0.002);
  EXPECT_EQ(run(x.shrink({{0, 512}, {0, 512}}).matmul(y.shrink({{0, 512}, {0, 512}}))).first, 1);
  auto [kernels, got] = run(x.matmul(y));
  EXPECT_EQ(kernels, 2);
  expect_matmul_at(got, x, y, 1024, {0, 511, 1023}, {0, 700, 1023});
}

// Operand packing (rules/rangeify.rw pack_operand): a realized operand of a contraction, read again
// along an output axis 16 times or more and larger than PACK_OPERAND_BYTES (16 KiB), is copied into
// 4x4 blocks first (a kernel per operand), panel by panel down the reduced axis; the values are the
// same, and the contraction's kernel keeps its name.
TEST_P(KernelCounts, ContractionOperandsArePackedIntoBlocks) {
  if (GetParam() != "INTERP" && GetParam() != "CPU")
    GTEST_SKIP() << GetParam() << ": operand packing is for host devices (CPU and INTERP)";
  const ScopedEnv no_blocks("REDUCE_BLOCK_BYTES", "0");  // the packing kernels alone
  Tensor a = input({16, 512}, 0.01), b = input({512, 16}, 0.02);
  const std::vector<double> ab = matmul_ref(a, b, 1, 16, 512, 16);
  // a (32 KiB, read again for each of 16 columns) and b (32 KiB, each of 16 rows): both packed;
  // without opts the names show the blocks (4 panels of 128 blocks of 4x4), which the
  // contraction's kernel reads along axes of its own (rows and columns in fours, the reduced axis
  // in 128 steps of 4)
  auto [kernels, got] = run(a.matmul(b));
  EXPECT_EQ(kernels, 3);
  expect_near(got, ab);
  {
    const ScopedEnv no_opts("NOOPT", "1");
    std::tie(kernels, got) = run(a.matmul(b));
    EXPECT_EQ(last_kernel_names(),
              (std::vector<std::string>{"E_4_128_4_4", "E_4_128_4_4", "r_4_4_4_4_128_4"}));
    expect_near(got, ab);
  }
  // the blocks as packing leaves them: a's packed copy (1 apart along the reduced axis, 4 along
  // the rows) is not copied again, b still is
  Tensor blocked_a = a.reshape({4, 4, 128, 4}).permute({0, 2, 1, 3}).contiguous().realize();
  Tensor a_view = blocked_a.permute({0, 2, 1, 3}).reshape({16, 512});
  std::tie(kernels, got) = run(a_view.matmul(b));
  EXPECT_EQ(kernels, 2);
  expect_near(got, ab);
  // not packed: operands of 16 KiB or less (a 64x64 matmul), an operand read again fewer than 16
  // times (a row times a matrix; a matrix times 8 columns), an axis that does not split into
  // fours, and packing off
  Tensor c = input({64, 64}, 0.01), d = input({64, 64}, 0.02);
  std::tie(kernels, got) = run(c.matmul(d));
  EXPECT_EQ(kernels, 1);
  expect_near(got, matmul_ref(c, d, 1, 64, 64, 64));
  Tensor row = input({1, 512}, 0.01), odd = input({512, 10}, 0.02);
  Tensor wide = input({16, 1024}, 0.01), narrow = input({1024, 8}, 0.02);
  std::tie(kernels, got) = run(row.matmul(b));
  EXPECT_EQ(kernels, 1);
  expect_near(got, matmul_ref(row, b, 1, 1, 512, 16));
  std::tie(kernels, got) = run(wide.matmul(narrow));
  EXPECT_EQ(kernels, 2);  // narrow is packed (read for each of 16 rows), wide is not (8 columns)
  expect_near(got, matmul_ref(wide, narrow, 1, 16, 1024, 8));
  std::tie(kernels, got) = run(a.matmul(odd));
  EXPECT_EQ(kernels, 1);  // odd's 10 columns are no panels; a is read again only 10 times
  expect_near(got, matmul_ref(a, odd, 1, 16, 512, 10));
  {
    const ScopedEnv off("PACK_OPERAND_BYTES", "0");
    std::tie(kernels, got) = run(a.matmul(b));
    EXPECT_EQ(kernels, 1);
    expect_near(got, ab);
  }
  // a transposed operand (b.T's rows are b's columns) and a batched matmul are packed the same way
  Tensor bt = input({16, 512}, 0.02);
  std::tie(kernels, got) = run(a.matmul(bt.transpose()));
  EXPECT_EQ(kernels, 3);
  expect_near(got, matmul_ref(a, bt.transpose().contiguous().realize(), 1, 16, 512, 16));
  Tensor ba = input({2, 16, 512}, 0.01), bb = input({2, 512, 16}, 0.02);
  std::tie(kernels, got) = run(ba.matmul(bb));
  EXPECT_EQ(kernels, 3);
  expect_near(got, matmul_ref(ba, bb, 2, 16, 512, 16));
  // on the CPU, one thread: a 512x512 matmul's kernel is still tinygrad's r_128_128_4_4_128_4
  if (GetParam() != "CPU") return;
  const ScopedEnv one_thread("CPU_THREADS", "1");
  Tensor x = input({512, 512}, 0.001), y = input({512, 512}, 0.002);
  std::tie(kernels, got) = run(x.matmul(y));
  EXPECT_EQ(last_kernel_names(),
            (std::vector<std::string>{"E_128_128_4_4", "E_128_128_4_4", "r_128_128_4_4_128_4"}));
  expect_matmul_at(got, x, y, 512, {0, 301, 511}, {0, 77, 511});
}

INSTANTIATE_TEST_SUITE_P(Devices, KernelCounts, ::testing::ValuesIn(test_devices()),
                         device_test_name);

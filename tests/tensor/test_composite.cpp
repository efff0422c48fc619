// The composite ops (tensor/composite.cpp) against reference loops written here, on INTERP and
// CPU: values, and gradients (float64) against central differences of the reference loops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "on_device.h"
#include "tensor/tensor.h"

using namespace tinyrw;

namespace {

class Composite : public OnDevice {};

using Values = std::vector<double>;
using Ref = std::function<Values(const Values&)>;

Values random_values(size_t n, uint32_t seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Values v(n);
  for (double& x : v) x = u(rng);
  return v;
}

int64_t count(const Dims& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor f64(const Values& v, const Dims& s) { return Tensor::from_vector(v, s, dtypes::float64); }

void expect_near(const Values& got, const Values& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << what << " at " << i;
  }
}

// The op's values against the reference, then the gradient of sum(op(x) * r) for random r
// against central differences of the reference's.
void check_op_or_throw(const std::function<Tensor(const Tensor&)>& op, const Ref& ref,
                       const Dims& shape, uint32_t seed, const std::string& what, bool gradient);
void check_op(const std::function<Tensor(const Tensor&)>& op, const Ref& ref, const Dims& shape,
              uint32_t seed, const std::string& what, bool gradient = true) {
  try {
    check_op_or_throw(op, ref, shape, seed, what, gradient);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}
void check_op_or_throw(const std::function<Tensor(const Tensor&)>& op, const Ref& ref,
                       const Dims& shape, uint32_t seed, const std::string& what, bool gradient) {
  const Values x = random_values(static_cast<size_t>(count(shape)), seed);
  const Tensor t = f64(x, shape);
  const Tensor y = op(t);
  const Values want = ref(x);
  expect_near(y.clone().to_doubles(), want, 1e-9, what);
  if (!gradient) return;
  const Values r = random_values(want.size(), seed + 1);
  const Tensor loss = (y * f64(r, y.shape())).sum();
  const Values got = loss.gradient({t})[0].to_doubles();
  auto scalar = [&](const Values& v) {
    const Values o = ref(v);
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += o[i] * r[i];
    return s;
  };
  Values numeric(x.size());
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    Values p = x, m = x;
    p[i] += h;
    m[i] -= h;
    numeric[i] = (scalar(p) - scalar(m)) / (2 * h);
  }
  expect_near(got, numeric, 1e-5, what + " gradient");
}

// ---- convolution reference: x (N, C, H, W), w (O, C/groups, KH, KW), pads (top, bottom, left,
// right), any of them negative
struct Conv2d {
  Dims xs, ws;
  int64_t groups = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pb = 0, pl = 0, pr = 0;
  Dims out_shape() const {
    const int64_t oh = (xs[2] + pt + pb - dh * (ws[2] - 1) - 1) / sh + 1;
    const int64_t ow = (xs[3] + pl + pr - dw * (ws[3] - 1) - 1) / sw + 1;
    return {xs[0], ws[0], oh, ow};
  }
  Values run(const Values& x, const Values& w, const Values* bias) const {
    const Dims os = out_shape();
    Values out(static_cast<size_t>(count(os)));
    const int64_t per_group = ws[0] / groups, cg = ws[1];
    for (int64_t n = 0; n < os[0]; ++n)
      for (int64_t o = 0; o < os[1]; ++o)
        for (int64_t i = 0; i < os[2]; ++i)
          for (int64_t j = 0; j < os[3]; ++j) {
            double acc = bias ? (*bias)[static_cast<size_t>(o)] : 0;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t ki = 0; ki < ws[2]; ++ki)
                for (int64_t kj = 0; kj < ws[3]; ++kj) {
                  const int64_t y = i * sh - pt + ki * dh, z = j * sw - pl + kj * dw;
                  if (y < 0 || y >= xs[2] || z < 0 || z >= xs[3]) continue;
                  const int64_t ch = (o / per_group) * cg + c;
                  acc += x[static_cast<size_t>(((n * xs[1] + ch) * xs[2] + y) * xs[3] + z)] *
                         w[static_cast<size_t>(((o * cg + c) * ws[2] + ki) * ws[3] + kj)];
                }
            out[static_cast<size_t>(((n * os[1] + o) * os[2] + i) * os[3] + j)] = acc;
          }
    return out;
  }
  ConvOptions options() const {
    return {
        .groups = groups, .stride = {sh, sw}, .dilation = {dh, dw}, .padding = {pl, pr, pt, pb}};
  }
};

// ---- pooling reference over the last two axes (PyTorch's definition, which tinygrad follows)
struct Pool2d {
  Dims xs;
  int64_t k = 2, s = 2, d = 1, p = 0;
  bool ceil_mode = false, count_include_pad = true;
  int64_t out_size(int64_t i) const {
    const int64_t span = d * (k - 1) + 1, num = i + 2 * p - span;
    int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
    if (ceil_mode && (o - 1) * s >= i + p) --o;  // no window starts in the end padding
    return o;
  }
  Dims out_shape() const {
    Dims o = xs;
    o[o.size() - 2] = out_size(xs[xs.size() - 2]);
    o.back() = out_size(xs.back());
    return o;
  }
  Values run(const Values& x, bool max) const {
    const int64_t h = xs[xs.size() - 2], w = xs.back(), planes = count(xs) / (h * w);
    const Dims os = out_shape();
    const int64_t oh = os[os.size() - 2], ow = os.back();
    Values out;
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t inside = 0;
          for (int64_t a = 0; a < k; ++a)
            for (int64_t b = 0; b < k; ++b) {
              const int64_t y = i * s - p + a * d, z = j * s - p + b * d;
              if (y < 0 || y >= h || z < 0 || z >= w) continue;
              const double v = x[static_cast<size_t>((pl * h + y) * w + z)];
              best = std::max(best, v);
              sum += v;
              ++inside;
            }
          // the divisor counts the user's padding, not what ceil mode adds past it
          const int64_t y0 = i * s - p, z0 = j * s - p;
          const int64_t rows = std::min(y0 + k, h + p) - y0, cols = std::min(z0 + k, w + p) - z0;
          out.push_back(max ? best
                            : sum / static_cast<double>(count_include_pad ? rows * cols : inside));
        }
    return out;
  }
  PoolOptions options() const {
    return {.kernel_size = {k, k},
            .stride = {s},
            .dilation = {d},
            .padding = {p},
            .ceil_mode = ceil_mode,
            .count_include_pad = count_include_pad};
  }
};

}  // namespace

TEST_P(Composite, Conv2dMatchesLoopsWithGroupsStrideDilationAndPadding) {
  const std::vector<Conv2d> cases = {
      {.xs = {2, 3, 6, 5}, .ws = {4, 3, 3, 3}},
      {.xs = {1, 4, 7, 6},
       .ws = {6, 2, 3, 2},
       .groups = 2,
       .sh = 2,
       .dw = 2,
       .pt = 1,
       .pb = 2,
       .pl = 0,
       .pr = 1},
      {.xs = {2, 2, 5, 5},
       .ws = {2, 1, 2, 2},
       .groups = 2,
       .sw = 3,
       .dh = 2,
       .pt = 2,
       .pb = 2,
       .pl = 2,
       .pr = 2},
      {.xs = {1, 1, 6, 6}, .ws = {1, 1, 3, 3}, .pt = -1, .pb = 1, .pl = 1, .pr = -1},  // negative
  };
  uint32_t seed = 1;
  for (const Conv2d& c : cases) {
    const Values w = random_values(static_cast<size_t>(count(c.ws)), seed * 7),
                 b = random_values(static_cast<size_t>(c.ws[0]), seed * 11);
    const std::string what = "conv case " + std::to_string(seed);
    const Tensor wt = f64(w, c.ws), bt = f64(b, {c.ws[0]});
    check_op([&](const Tensor& x) { return x.conv2d(wt, &bt, c.options()); },
             [&](const Values& x) { return c.run(x, w, &b); }, c.xs, seed, what);
    // and the gradient of the weight
    const Values x = random_values(static_cast<size_t>(count(c.xs)), seed * 13);
    const Tensor xt = f64(x, c.xs);
    check_op([&](const Tensor& wv) { return xt.conv2d(wv, nullptr, c.options()); },
             [&](const Values& wv) { return c.run(x, wv, nullptr); }, c.ws, seed + 100,
             what + " (weight)");
    ++seed;
  }
}

// conv_transpose2d against its definition: each input element scatters its kernel-weighted
// copies to the output rows i * stride - pad + k * dilation (groups, stride, dilation, padding,
// output padding); its gradients (of the input, and of the weight) against central differences
TEST_P(Composite, ConvTranspose2dMatchesItsScatterLoop) {
  struct Case {
    Dims xs, ws;  // x (N, Cin, H, W), w (Cin, Cout / groups, KH, KW)
    int64_t groups = 1, s = 1, d = 1, p = 0, op = 0;
  };
  const std::vector<Case> cases = {
      {.xs = {2, 3, 4, 5}, .ws = {3, 2, 3, 3}},
      {.xs = {1, 4, 3, 4}, .ws = {4, 3, 3, 2}, .groups = 2, .s = 2, .p = 1, .op = 1},
      {.xs = {1, 2, 4, 3}, .ws = {2, 1, 2, 3}, .groups = 2, .s = 3, .d = 2},
      {.xs = {1, 1, 5, 5}, .ws = {1, 2, 3, 3}, .d = 2, .p = 2},
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    const int64_t cin_g = c.xs[1] / c.groups, cout_g = c.ws[1], cout = cout_g * c.groups;
    const int64_t oh = (c.xs[2] - 1) * c.s - 2 * c.p + c.d * (c.ws[2] - 1) + 1 + c.op;
    const int64_t ow = (c.xs[3] - 1) * c.s - 2 * c.p + c.d * (c.ws[3] - 1) + 1 + c.op;
    auto run = [&](const Values& x, const Values& w) {
      Values out(static_cast<size_t>(c.xs[0] * cout * oh * ow), 0.0);
      for (int64_t n = 0; n < c.xs[0]; ++n)
        for (int64_t ci = 0; ci < c.xs[1]; ++ci)
          for (int64_t i = 0; i < c.xs[2]; ++i)
            for (int64_t j = 0; j < c.xs[3]; ++j)
              for (int64_t co = 0; co < cout_g; ++co)
                for (int64_t a = 0; a < c.ws[2]; ++a)
                  for (int64_t b = 0; b < c.ws[3]; ++b) {
                    const int64_t y = i * c.s - c.p + a * c.d, z = j * c.s - c.p + b * c.d;
                    if (y < 0 || y >= oh || z < 0 || z >= ow) continue;
                    const int64_t o = (ci / cin_g) * cout_g + co;
                    out[static_cast<size_t>(((n * cout + o) * oh + y) * ow + z)] +=
                        x[static_cast<size_t>(((n * c.xs[1] + ci) * c.xs[2] + i) * c.xs[3] + j)] *
                        w[static_cast<size_t>(((ci * cout_g + co) * c.ws[2] + a) * c.ws[3] + b)];
                  }
      return out;
    };
    const ConvOptions o{.groups = c.groups, .stride = {c.s}, .dilation = {c.d}, .padding = {c.p}};
    const std::string what = "conv_transpose case " + std::to_string(seed);
    const Values w = random_values(static_cast<size_t>(count(c.ws)), seed * 7);
    const Tensor wt = f64(w, c.ws);
    check_op([&](const Tensor& x) { return x.conv_transpose2d(wt, nullptr, o, {c.op}); },
             [&](const Values& x) { return run(x, w); }, c.xs, seed, what);
    const Values x = random_values(static_cast<size_t>(count(c.xs)), seed * 13);
    const Tensor xt = f64(x, c.xs);
    check_op([&](const Tensor& wv) { return xt.conv_transpose2d(wv, nullptr, o, {c.op}); },
             [&](const Values& wv) { return run(x, wv); }, c.ws, seed + 100, what + " (weight)");
    ++seed;
  }
  // the weight's channels must match the input's
  EXPECT_THROW((void)Tensor::ones({1, 3, 4, 4}).conv_transpose2d(Tensor::ones({2, 1, 3, 3})),
               TensorError);
}

TEST_P(Composite, PoolsMatchLoops) {
  const std::vector<Pool2d> cases = {
      {.xs = {2, 3, 6, 6}},
      {.xs = {1, 2, 7, 5}, .k = 3, .s = 2, .p = 1},
      {.xs = {1, 1, 7, 7}, .k = 2, .s = 2, .ceil_mode = true},
      {.xs = {1, 1, 8, 6}, .k = 3, .s = 2, .p = 1, .ceil_mode = true},
      {.xs = {1, 1, 5, 6}, .k = 2, .s = 1, .p = 1, .count_include_pad = false},
      {.xs = {1, 1, 7, 7}, .k = 3, .s = 2, .p = 1, .ceil_mode = true, .count_include_pad = false},
  };
  int n = 0;
  for (const Pool2d& p : cases) {
    const std::string what = "pool case " + std::to_string(n);
    check_op([&](const Tensor& x) { return x.avg_pool2d(p.options()); },
             [&](const Values& x) { return p.run(x, false); }, p.xs, 20 + n, what + " avg");
    check_op([&](const Tensor& x) { return x.max_pool2d(p.options()); },
             [&](const Values& x) { return p.run(x, true); }, p.xs, 40 + n, what + " max");
    ++n;
  }
  // dilation (max only: an average over a dilated window is not defined by PyTorch)
  const Pool2d dilated{.xs = {1, 2, 9, 8}, .k = 2, .s = 2, .d = 2, .p = 1};
  check_op([&](const Tensor& x) { return x.max_pool2d(dilated.options()); },
           [&](const Values& x) { return dilated.run(x, true); }, dilated.xs, 60, "dilated max");
}

TEST_P(Composite, MaxPoolIndicesPointAtTheFirstMaximum) {
  // ties: every window of ones; its first element is the top-left one
  const Tensor ones = Tensor::ones({1, 1, 4, 4});
  auto [v, i] = ones.max_pool2d_with_indices();
  EXPECT_EQ(v.to_doubles(), (Values{1, 1, 1, 1}));
  EXPECT_EQ(i.to_doubles(), (Values{0, 2, 8, 10}));
  EXPECT_EQ(i.dtype(), dtypes::int32);
  const Values x = random_values(30, 5);
  auto [mv, mi] =
      f64(x, {1, 5, 6})
          .max_pool2d_with_indices({.kernel_size = {3, 3}, .stride = {2}, .padding = {1}});
  const Values got_v = mv.to_doubles(), got_i = mi.to_doubles();
  for (size_t k = 0; k < got_v.size(); ++k)
    EXPECT_EQ(x.at(static_cast<size_t>(got_i[k])), got_v[k]) << "window " << k;
}

TEST_P(Composite, ScansMatchLoopsShortAndLong) {
  for (int64_t n : {1, 7, 512, 513, 1300}) {  // past 512: chunks of 256 plus their totals
    const Dims shape{3, n};
    auto cum = [&](const Values& x, bool max) {
      Values out(x.size());
      for (int64_t r = 0; r < 3; ++r) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0;
        for (int64_t j = 0; j < n; ++j) {
          const double v = x[static_cast<size_t>(r * n + j)];
          acc = max ? std::max(acc, v) : acc + v;
          out[static_cast<size_t>(r * n + j)] = acc;
        }
      }
      return out;
    };
    // INTERP runs a long scan's gradient (the windows' n * n reads) slowly: short ones there
    const bool grad = n <= (GetParam() == "INTERP" ? 7 : 513);
    check_op([](const Tensor& x) { return x.cumsum(1); },
             [&](const Values& x) { return cum(x, false); }, shape, 70,
             "cumsum " + std::to_string(n), grad);
    check_op([](const Tensor& x) { return x.cummax(1).first; },
             [&](const Values& x) { return cum(x, true); }, shape, 71,
             "cummax " + std::to_string(n), grad);
    // along axis 0 of the transpose, and of ints (a sum widens int8 to int32)
    std::vector<int8_t> small(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) small[static_cast<size_t>(j)] = static_cast<int8_t>(j % 7 - 3);
    Tensor ints = Tensor::from_vector(small, {n, 1}, dtypes::int8).cumsum(0);
    EXPECT_EQ(ints.dtype(), dtypes::int32);
    const Values got = ints.to_doubles();
    double acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      acc += small[static_cast<size_t>(j)];
      ASSERT_EQ(got[static_cast<size_t>(j)], acc) << "int cumsum at " << j << " of " << n;
    }
  }
  // cumprod, and cummax's indices: where the running maximum was first reached
  const Tensor t = Tensor::from_vector(std::vector<float>{2, 1, 3, 3, 0.5f, 4}, {6});
  EXPECT_EQ(t.cumprod(0).to_doubles(), (Values{2, 2, 6, 18, 9, 36}));
  auto [values, indices] = t.cummax(0);
  EXPECT_EQ(values.to_doubles(), (Values{2, 2, 3, 3, 3, 4}));
  EXPECT_EQ(indices.to_doubles(), (Values{0, 0, 2, 2, 2, 5}));
  EXPECT_EQ(indices.dtype(), dtypes::int32);
}

TEST_P(Composite, OneHotGatherAndIndexing) {
  const Tensor labels =
      Tensor::from_vector(std::vector<int32_t>{2, 0, 3, -1}, {2, 2}, dtypes::int32);
  const Values hot = labels.one_hot(4).to_doubles();
  const std::vector<int32_t> lv{2, 0, 3, -1};
  ASSERT_EQ(hot.size(), 16u);
  for (size_t i = 0; i < 4; ++i)
    for (int32_t c = 0; c < 4; ++c)
      EXPECT_EQ(hot[i * 4 + static_cast<size_t>(c)], lv[i] == c ? 1 : 0);
  EXPECT_EQ(labels.one_hot(4).shape(), (Dims{2, 2, 4}));

  // gather along each axis of a (3, 4, 5) tensor with an index no larger than it
  const Values x = random_values(60, 9);
  const Dims xs{3, 4, 5};
  for (int dim = 0; dim < 3; ++dim) {
    const Dims is{2, 3, 4};
    std::vector<int32_t> idx;
    std::mt19937 rng(static_cast<uint32_t>(dim));
    for (int64_t k = 0; k < count(is); ++k)
      idx.push_back(
          static_cast<int32_t>(rng() % static_cast<uint32_t>(xs[static_cast<size_t>(dim)])));
    const Tensor it = Tensor::from_vector(idx, is, dtypes::int32);
    auto ref = [&](const Values& v) {
      Values out;
      for (int64_t a = 0; a < is[0]; ++a)
        for (int64_t b = 0; b < is[1]; ++b)
          for (int64_t c = 0; c < is[2]; ++c) {
            int64_t p[3] = {a, b, c};
            p[dim] = idx[static_cast<size_t>((a * is[1] + b) * is[2] + c)];
            out.push_back(v[static_cast<size_t>((p[0] * xs[1] + p[1]) * xs[2] + p[2])]);
          }
      return out;
    };
    check_op([&](const Tensor& t) { return t.gather(dim, it); }, ref, xs, 80 + dim,
             "gather dim " + std::to_string(dim));
  }
  // rows named by an int tensor; negative ones from the end, out of range ones give zeros
  const Tensor rows = Tensor::from_vector(std::vector<int32_t>{3, -1, 0, 9}, {2, 2}, dtypes::int32);
  auto ref_rows = [](const Values& v) {
    Values out;
    for (int64_t r : {3, 3, 0, -1})
      for (int64_t c = 0; c < 5; ++c) out.push_back(r < 0 ? 0 : v[static_cast<size_t>(r * 5 + c)]);
    return out;
  };
  check_op([&](const Tensor& t) { return t[rows]; }, ref_rows, {4, 5}, 90, "indexing");
  EXPECT_EQ(f64(random_values(20, 1), {4, 5})[rows].shape(), (Dims{2, 2, 5}));
}

TEST_P(Composite, LossesMatchTheirFormulas) {
  const int64_t n = 5, c = 4;
  const std::vector<int32_t> labels{1, 3, 0, 2, 3};
  const Tensor lt = Tensor::from_vector(labels, {n}, dtypes::int32);
  auto log_probs = [&](const Values& x, int64_t row) {
    double m = -1e300, s = 0;
    for (int64_t k = 0; k < c; ++k) m = std::max(m, x[static_cast<size_t>(row * c + k)]);
    for (int64_t k = 0; k < c; ++k) s += std::exp(x[static_cast<size_t>(row * c + k)] - m);
    Values lp(static_cast<size_t>(c));
    for (int64_t k = 0; k < c; ++k)
      lp[static_cast<size_t>(k)] = x[static_cast<size_t>(row * c + k)] - m - std::log(s);
    return lp;
  };
  for (double smoothing : {0.0, 0.2})
    for (int64_t ignore : {-1, 3}) {
      auto ref = [&](const Values& x) {
        double total = 0, rows = 0;
        for (int64_t r = 0; r < n; ++r) {
          if (labels[static_cast<size_t>(r)] == ignore) continue;
          const Values lp = log_probs(x, r);
          double mean = 0;
          for (double v : lp) mean += v / static_cast<double>(c);
          total -= (1 - smoothing) * lp[static_cast<size_t>(labels[static_cast<size_t>(r)])] +
                   smoothing * mean;
          rows += 1;
        }
        return Values{total / rows};
      };
      check_op(
          [&](const Tensor& x) { return x.sparse_categorical_crossentropy(lt, ignore, smoothing); },
          ref, {n, c}, 100,
          "sparse ce smoothing " + std::to_string(smoothing) + " ignore " + std::to_string(ignore));
    }
  // a masked class (a -inf logit) that no label picks: a finite loss without smoothing (tinygrad's
  // value; a mean term times 0 would make it NaN), -log(1/2) for each of two rows of two live
  // classes
  const float ninf = -std::numeric_limits<float>::infinity();
  const Tensor masked = Tensor::from_vector(std::vector<float>{0, 0, ninf, ninf, 1, 1}, {2, 3});
  const std::vector<double> loss = masked
                                       .sparse_categorical_crossentropy(Tensor::from_vector(
                                           std::vector<int32_t>{1, 2}, {2}, dtypes::int32))
                                       .to_doubles();
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_NEAR(loss[0], std::log(2.0), 1e-6);
  // cross_entropy with labels (per row, unreduced) and with class probabilities (summed)
  auto ce_rows = [&](const Values& x, const Values& target, double smoothing) {
    Values out;
    for (int64_t r = 0; r < n; ++r) {
      const Values lp = log_probs(x, r);
      double l = 0;
      for (int64_t k = 0; k < c; ++k)
        l -=
            lp[static_cast<size_t>(k)] * ((1 - smoothing) * target[static_cast<size_t>(r * c + k)] +
                                          smoothing / static_cast<double>(c));
      out.push_back(l);
    }
    return out;
  };
  Values hot(static_cast<size_t>(n * c), 0);
  for (int64_t r = 0; r < n; ++r)
    hot[static_cast<size_t>(r * c + labels[static_cast<size_t>(r)])] = 1;
  check_op([&](const Tensor& x) { return x.cross_entropy(lt, Tensor::Reduction::None, 0.1); },
           [&](const Values& x) { return ce_rows(x, hot, 0.1); }, {n, c}, 110,
           "cross entropy labels");
  const Values probs = random_values(static_cast<size_t>(n * c), 111, 0, 1);
  const Tensor pt = f64(probs, {n, c});
  check_op([&](const Tensor& x) { return x.cross_entropy(pt, Tensor::Reduction::Sum); },
           [&](const Values& x) {
             double s = 0;
             for (double v : ce_rows(x, probs, 0)) s += v;
             return Values{s};
           },
           {n, c}, 112, "cross entropy probabilities");
  // binary cross entropy of probabilities in (0, 1)
  const Values targets = random_values(6, 113, 0, 1);
  const Tensor tt = f64(targets, {6});
  check_op([&](const Tensor& x) { return (x * 0.2 + 0.5).binary_crossentropy(tt); },
           [&](const Values& x) {
             double s = 0;
             for (size_t i = 0; i < x.size(); ++i) {
               const double p = x[i] * 0.2 + 0.5;
               s -= targets[i] * std::log(p) + (1 - targets[i]) * std::log(1 - p);
             }
             return Values{s / 6};
           },
           {6}, 114, "binary cross entropy");
}

TEST_P(Composite, NormalizationMatchesLoops) {
  const Dims s{3, 4, 5};
  auto layer = [&](const Values& x) {  // over the last axis
    Values out;
    for (int64_t r = 0; r < 12; ++r) {
      double m = 0, v = 0;
      for (int64_t k = 0; k < 5; ++k) m += x[static_cast<size_t>(r * 5 + k)] / 5;
      for (int64_t k = 0; k < 5; ++k) v += std::pow(x[static_cast<size_t>(r * 5 + k)] - m, 2) / 5;
      for (int64_t k = 0; k < 5; ++k)
        out.push_back((x[static_cast<size_t>(r * 5 + k)] - m) / std::sqrt(v + 1e-5));
    }
    return out;
  };
  check_op([](const Tensor& x) { return x.layernorm(); }, layer, s, 120, "layernorm");
  const Values w = random_values(4, 121), b = random_values(4, 122), mean = random_values(4, 123),
               inv = random_values(4, 124, 0.5, 2);
  const Tensor wt = f64(w, {4}), bt = f64(b, {4}), mt = f64(mean, {4}), it = f64(inv, {4});
  auto batch = [&](const Values& x) {  // channel axis 1
    Values out(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t ch = (i / 5) % 4;
      out[i] = (x[i] - mean[ch]) * w[ch] * inv[ch] + b[ch];
    }
    return out;
  };
  check_op([&](const Tensor& x) { return x.batchnorm(&wt, &bt, mt, it); }, batch, s, 125,
           "batchnorm");
}

TEST_P(Composite, ElementwiseHelpers) {
  const Tensor x = Tensor::from_vector(std::vector<float>{-3, -0.5f, 0, 2}, {4});
  EXPECT_EQ(x.abs().to_doubles(), (Values{3, 0.5, 0, 2}));
  EXPECT_EQ(x.sign().to_doubles(), (Values{-1, -1, 0, 1}));
  EXPECT_EQ(x.clip(-1, 1).to_doubles(), (Values{-1, -0.5, 0, 1}));
  EXPECT_EQ(x.clip(std::nullopt, 0).to_doubles(), (Values{-3, -0.5, 0, 0}));
  const Tensor i = Tensor::from_vector(std::vector<int32_t>{-7, 4}, {2}, dtypes::int32);
  EXPECT_EQ(i.abs().to_doubles(), (Values{7, 4}));
  EXPECT_EQ(i.abs().dtype(), dtypes::int32);
  // the gradient of abs is the sign
  const Tensor g = f64({-2, 3}, {2});
  EXPECT_EQ(g.abs().sum().gradient({g})[0].to_doubles(), (Values{-1, 1}));
  const Tensor m = Tensor::ones({3, 3});
  EXPECT_EQ(m.triu(1).to_doubles(), (Values{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(m.tril().to_doubles(), (Values{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(Tensor::arange(3).repeat({2, 2}).to_doubles(),
            (Values{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(Tensor::arange(4).pad({{1, -2}}, -1.0).to_doubles(), (Values{-1, 0, 1}));
}

TEST_P(Composite, DropoutActsInTrainingOnly) {
  const Tensor x = Tensor::ones({4000});
  EXPECT_EQ(x.dropout(0.5).to_doubles(), Values(4000, 1.0));  // not training
  Tensor::set_training(true);
  Tensor::manual_seed(42);
  const Values a = x.dropout(0.25).to_doubles();
  Tensor::manual_seed(42);
  const Values b = x.dropout(0.25).to_doubles();
  const Values c = x.dropout(0.25).to_doubles();  // the next seed
  const Values zero = x.dropout(1).to_doubles();
  Tensor::set_training(false);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  int dropped = 0;
  for (double v : a) {
    if (v == 0)
      ++dropped;
    else
      EXPECT_NEAR(v, 1 / 0.75, 1e-6);
  }
  EXPECT_GT(dropped, 850);  // 1000 expected
  EXPECT_LT(dropped, 1150);
  EXPECT_EQ(zero, Values(4000, 0.0));
}

TEST_P(Composite, BadArgumentsAreNamed) {
  auto expect_error = [](const std::function<void()>& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error, expected one containing: " << part;
    } catch (const TensorError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  const Tensor x = Tensor::ones({1, 3, 5, 5});
  expect_error([&] { x.conv2d(Tensor::ones({4, 2, 3, 3})); }, "groups * 2 = 2 channels");
  expect_error(
      [&] {
        x.conv2d(Tensor::ones({4, 3, 3, 3}), nullptr, {.padding = {1, 2, 3}});
      },
      "padding needs 1, 2 or 4 values");
  expect_error([&] { x.max_pool2d({.kernel_size = {6, 6}}); }, "the kernel spans 6 elements");
  expect_error([&] { x.one_hot(3); }, "one_hot needs an integer tensor");
  expect_error(
      [&] {
        x.gather(1, Tensor::zeros({1, 3}, dtypes::int32));
      },
      "gather: the index has 2 dimensions");
  expect_error(
      [&] {
        Tensor::ones({2, 3}).sparse_categorical_crossentropy(Tensor::zeros({2}, dtypes::int32), -1,
                                                             1.5);
      },
      "label_smoothing must be in [0, 1]");
  expect_error(
      [&] {
        Tensor::ones({2, 3}).cross_entropy(Tensor::zeros({3}, dtypes::int32));
      },
      "cross_entropy: targets of shape (3)");
  expect_error([&] { x.dropout(1.5); }, "dropout: p=1.5 is outside [0, 1]");
  expect_error([&] { x.clip(std::nullopt, std::nullopt); }, "clip needs a lower or an upper bound");
}

INSTANTIATE_TEST_SUITE_P(Devices, Composite, ::testing::ValuesIn(test_devices()), device_test_name);

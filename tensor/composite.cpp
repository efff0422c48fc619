// Ops composed of the Tensor's primitive ops, with tinygrad's names and semantics: convolution
// and pooling (sliding windows made by movement ops alone, tinygrad's _pool), scans, one-hot
// indexing, losses and normalization. Being compositions, they need no gradient rules of their
// own.
#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/int128.h"
#include "tensor/function.h"
#include "tensor/tensor.h"

namespace tinyrw {

namespace {

// Python's ceiling division (ir/int128.h's floor division, negated twice)
int64_t ceil_div(int64_t a, int64_t b) { return static_cast<int64_t>(-floor_div(-a, b)); }

// One value per spatial axis from a list of one (for all) or of `n`.
Dims per_axis(const Dims& v, size_t n, std::string_view what, std::string_view op) {
  if (v.size() == 1) return Dims(n, v[0]);
  if (v.size() != n)
    throw TensorError(fmt::format("{}: {} needs 1 or {} values, got {}", op, what, n, v.size()));
  return v;
}

// tinygrad's resolve_pool_pads then flat_to_grouped: (before, after) per spatial axis in axis
// order, from one value, one per axis, or two per axis listed from the last axis.
std::vector<std::pair<int64_t, int64_t>> pool_pads(const Dims& padding, size_t n,
                                                   std::string_view op) {
  Dims flat;  // (left, right, top, bottom, ...): the last axis first
  if (padding.size() == 1) {
    flat.assign(2 * n, padding[0]);
  } else if (padding.size() == n) {
    for (size_t i = n; i-- > 0;) flat.insert(flat.end(), {padding[i], padding[i]});
  } else if (padding.size() == 2 * n) {
    flat = padding;
  } else {
    throw TensorError(fmt::format("{}: padding needs 1, {} or {} values, got {} ({})", op, n, 2 * n,
                                  padding.size(), fmt::join(padding, ", ")));
  }
  std::vector<std::pair<int64_t, int64_t>> grouped(n);
  for (size_t i = 0; i < n; ++i) grouped[n - 1 - i] = {flat[2 * i], flat[2 * i + 1]};
  return grouped;
}

// Padding of every axis: none on the leading ones, `spatial` on the trailing ones.
std::vector<std::pair<int64_t, int64_t>> full_pads(
    size_t ndim, const std::vector<std::pair<int64_t, int64_t>>& spatial) {
  std::vector<std::pair<int64_t, int64_t>> p(ndim - spatial.size(), {0, 0});
  p.insert(p.end(), spatial.begin(), spatial.end());
  return p;
}

// The smallest value of a dtype (-inf for floats): max's identity and max_pool's padding.
double lowest(DType d) {
  if (d.is_float()) return -std::numeric_limits<double>::infinity();
  return static_cast<double>(d.int_min());
}

double identity(Op op, DType d) { return op == Op::Add ? 0.0 : op == Op::Mul ? 1.0 : lowest(d); }

std::vector<int> trailing_axes(size_t n) {
  std::vector<int> axes;
  for (size_t i = n; i > 0; --i) axes.push_back(-static_cast<int>(i));
  return axes;
}

std::atomic<bool> g_training{false};
std::atomic<uint64_t> g_next_seed{0x5EED};

}  // namespace

// ---- elementwise ------------------------------------------------------------------------------

Tensor Tensor::sign() const {
  return ne(scalar_like(0))
      .where(lt(scalar_like(0)).where(scalar_like(-1), scalar_like(1)), scalar_like(0));
}

Tensor Tensor::abs() const {
  if (dtype().is_unsigned() || dtype().is_bool()) return *this;
  return *this * sign();
}

Tensor Tensor::clip(std::optional<double> lo, std::optional<double> hi) const {
  if (!lo && !hi) throw TensorError("clip needs a lower or an upper bound (or both)");
  Tensor r = *this;
  if (lo) r = r.lt(r.scalar_like(*lo)).where(r.scalar_like(*lo), r);
  if (hi) r = r.gt(r.scalar_like(*hi)).where(r.scalar_like(*hi), r);
  return r;
}

// ---- movement ---------------------------------------------------------------------------------

Tensor Tensor::pad(std::vector<std::pair<int64_t, int64_t>> padding, double value) const {
  const Dims s = shape();
  if (padding.size() != s.size())
    throw TensorError(
        fmt::format("pad needs {} (before, after) pairs, got {}", s.size(), padding.size()));
  std::vector<std::pair<int64_t, int64_t>> keep, grow;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto [b, a] = padding[i];
    const int64_t from = std::max<int64_t>(-b, 0), to = s[i] - std::max<int64_t>(-a, 0);
    if (to < from)
      throw TensorError(
          fmt::format("pad ({}, {}) removes more than axis {} of size {} holds", b, a, i, s[i]));
    keep.emplace_back(from, to);
    grow.emplace_back(std::max<int64_t>(b, 0), std::max<int64_t>(a, 0));
  }
  const Tensor kept = shrink(keep), padded = kept.pad(grow);
  if (value == 0) return padded;
  // a mask of the original elements: the fill is a value of its own, not a zero added to
  const Tensor inside = constant(kept.shape(), 1, dtypes::bool_).pad(grow);
  return inside.where(padded, padded.scalar_like(value));
}

Tensor Tensor::repeat(Dims repeats) const {
  Dims base = shape();
  if (repeats.size() < base.size())
    throw TensorError(
        fmt::format("repeat needs at least {} repeats, got {}", base.size(), repeats.size()));
  base.insert(base.begin(), repeats.size() - base.size(), 1);
  Dims unsqueezed, expanded, out;
  for (size_t i = 0; i < base.size(); ++i) {
    if (repeats[i] < 0) throw TensorError(fmt::format("repeat: {} is negative", repeats[i]));
    if (repeats[i] != 1) {
      unsqueezed.push_back(1);
      expanded.push_back(repeats[i]);
    }
    unsqueezed.push_back(base[i]);
    expanded.push_back(base[i]);
    out.push_back(repeats[i] * base[i]);
  }
  return reshape(unsqueezed).expand(expanded).reshape(out);
}

namespace {
// The (rows, cols) mask of j - i >= diagonal (upper) or j - i <= diagonal (lower).
Tensor triangle(int64_t rows, int64_t cols, int64_t diagonal, bool upper) {
  const Tensor i = Tensor::arange(rows).reshape({rows, 1}) + static_cast<double>(diagonal);
  const Tensor j = Tensor::arange(cols);
  return upper ? i.le(j) : i.ge(j);
}
}  // namespace

Tensor Tensor::triu(int64_t diagonal) const {
  if (ndim() < 2) throw TensorError("triu needs at least 2 dimensions");
  const Dims s = shape();
  return triangle(s[s.size() - 2], s.back(), diagonal, true).where(*this, scalar_like(0));
}

Tensor Tensor::tril(int64_t diagonal) const {
  if (ndim() < 2) throw TensorError("tril needs at least 2 dimensions");
  const Dims s = shape();
  return triangle(s[s.size() - 2], s.back(), diagonal, false).where(*this, scalar_like(0));
}

// ---- convolution and pooling ------------------------------------------------------------------

// Each window is read through a repeat and shrinks, so no padding (and no gather) is needed: the
// input is tiled enough times that windows of every stride and dilation are plain reshapes.
Tensor Tensor::pool(const Dims& k, const Dims& stride, const Dims& dilation) const {
  const size_t n = k.size(), lead = ndim() - n;
  if (ndim() < n)
    throw TensorError(
        fmt::format("cannot pool a tensor of {} dimensions with a {}-d kernel", ndim(), n));
  const Dims s = per_axis(stride, n, "stride", "pool"),
             d = per_axis(dilation, n, "dilation", "pool");
  const Dims shp = shape();
  Dims in(shp.end() - static_cast<std::ptrdiff_t>(n), shp.end()), o(n), f(n), reps(lead, 1);
  for (size_t i = 0; i < n; ++i) {
    if (k[i] < 1 || s[i] < 1 || d[i] < 1)
      throw TensorError(fmt::format("pool: kernel {}, stride {} and dilation {} must be positive",
                                    k[i], s[i], d[i]));
    if (d[i] * (k[i] - 1) + 1 > in[i])
      throw TensorError(fmt::format(
          "pool: the kernel spans {} elements of axis {}, which has {} (kernel {}, dilation {})",
          d[i] * (k[i] - 1) + 1, lead + i, in[i], k[i], d[i]));
    o[i] = ceil_div(in[i] - d[i] * (k[i] - 1), s[i]);
    f[i] = std::max<int64_t>(1, ceil_div(o[i] * s[i] - d[i], in[i]));  // tiles needed per stride
    reps.push_back(ceil_div(k[i] * (in[i] * f[i] + d[i]), in[i]));
  }
  auto keep_to = [&](const Tensor& t, const Dims& sizes) {  // shrink the trailing axes to sizes
    std::vector<std::pair<int64_t, int64_t>> r;
    const Dims ts = t.shape();
    for (size_t i = 0; i < ts.size(); ++i) r.emplace_back(0, i < lead ? ts[i] : sizes[i - lead]);
    return t.shrink(r);
  };
  const Dims leading(shp.begin(), shp.begin() + static_cast<std::ptrdiff_t>(lead));
  auto with_leading = [&](Dims tail) {
    Dims r = leading;
    r.insert(r.end(), tail.begin(), tail.end());
    return r;
  };
  Dims spans, k_span, k_os, k_o_s, k_o_1, k_o;
  for (size_t i = 0; i < n; ++i) {
    spans.push_back(k[i] * (in[i] * f[i] + d[i]));
    k_span.insert(k_span.end(), {k[i], in[i] * f[i] + d[i]});  // dilation: rows of span + d
    k_os.insert(k_os.end(), {k[i], o[i] * s[i]});
    k_o_s.insert(k_o_s.end(), {k[i], o[i], s[i]});
    k_o_1.insert(k_o_1.end(), {k[i], o[i], 1});
    k_o.insert(k_o.end(), {k[i], o[i]});
  }
  Tensor x = keep_to(repeat(reps), spans).reshape(with_leading(k_span));
  x = keep_to(x, k_os).reshape(with_leading(k_o_s));  // stride: every s-th start
  x = keep_to(x, k_o_1).reshape(with_leading(k_o));
  std::vector<int> order(lead);
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int>(lead + 2 * i + 1));  // outputs
  for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int>(lead + 2 * i));      // kernel
  return x.permute(order);
}

// conv2d's products summed, without the bias: x's windows (tinygrad's _pool) times the weight,
// summed over (cin, *kernel) of each group. Shapes were checked by conv2d.
Tensor conv_windows(const Tensor& input, const Tensor& weight, const ConvOptions& opt) {
  const Dims xs = input.shape(), ws = weight.shape();
  const size_t n = ws.size() - 2;
  const int64_t bs = xs[0], cout = ws[0], cin = ws[1], g = opt.groups;
  const Dims kernel(ws.begin() + 2, ws.end());
  const Tensor windows = input.pad(full_pads(xs.size(), pool_pads(opt.padding, n, "conv2d")), 0.0)
                             .pool(kernel, opt.stride, opt.dilation);
  const Dims ws_shape = windows.shape();  // (bs, cin_total, *out, *kernel)
  const Dims out(ws_shape.begin() + 2, ws_shape.begin() + 2 + static_cast<std::ptrdiff_t>(n));
  const int64_t rcout = cout / g;
  // (bs, groups, cin, 1, *out, *kernel) broadcast over each group's outputs, then ordered as
  // (bs, groups, rcout, *out, cin, *kernel) so that the reduced axes are the last ones
  Dims split{bs, g, cin, 1}, wide{bs, g, cin, rcout}, wshape{1, g, rcout};
  for (int64_t v : out) {
    split.push_back(v);
    wide.push_back(v);
    wshape.push_back(1);
  }
  wshape.push_back(cin);
  for (int64_t v : kernel) {
    split.push_back(v);
    wide.push_back(v);
    wshape.push_back(v);
  }
  std::vector<int> order{0, 1, 3};
  for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int>(4 + i));
  order.push_back(2);
  for (size_t i = 0; i < n; ++i) order.push_back(static_cast<int>(4 + n + i));
  const Tensor x = windows.reshape(split).expand(wide).permute(order);
  Dims result{bs, cout};
  result.insert(result.end(), out.begin(), out.end());
  return (x * weight.reshape(wshape)).sum(trailing_axes(n + 1), true).reshape(result);
}

namespace {

Tensor transposed_conv(const Tensor& input, const Tensor& weight, const Tensor* bias,
                       const ConvOptions& opt, const Dims& output_padding, bool staged);

// The gradient of conv_windows with respect to its input: the output gradient convolved with the
// flipped kernel (a transposed convolution), a forward-style kernel instead of the sum over
// overlapping windows that differentiating the windows gives (tinygrad's; 5-10x slower here). The
// weight's gradient is the body's own.
std::vector<std::optional<Tensor>> conv_gradient(const ConvOptions& opt,
                                                 const std::vector<std::optional<Tensor>>& g,
                                                 const std::vector<Tensor>& args) {
  if (g.empty() || !g[0]) return {};
  const Tensor &x = args.at(0), &w = args.at(1);
  const Dims xs = x.shape(), ws = w.shape(), gs = g[0]->shape();
  const size_t n = ws.size() - 2;
  const Dims s = per_axis(opt.stride, n, "stride", "conv2d"),
             d = per_axis(opt.dilation, n, "dilation", "conv2d");
  const auto pads = pool_pads(opt.padding, n, "conv2d");
  // the output padding that gives back x's size where the stride skipped trailing elements
  Dims extra(n);
  for (size_t i = 0; i < n; ++i)
    extra[i] = xs[2 + i] - ((gs[2 + i] - 1) * s[i] + 1 + (ws[2 + i] - 1) * d[i] - pads[i].first -
                            pads[i].second);
  // the output's gradient in a buffer: both convolutions read each element many times, and
  // would recompute the elementwise backward chain that gives it (an activation's mask, a norm's
  // scale) at every read
  const Tensor go = g[0]->contiguous();
  Tensor dx = transposed_conv(go, w, nullptr, opt, extra, true);
  Tensor dw = conv_windows(x, w, opt).gradient({w}, &go)[0];
  return {dx, dw};
}

// conv_windows as a function() CALL with conv_gradient as its gradient, one per set of options
// (so that a model's graph, and with it the schedule cache key, is the same every step)
Tensor conv_call(const Tensor& x, const Tensor& w, const ConvOptions& opt) {
  using Fn = Function<std::function<Tensor(Tensor, Tensor)>>;
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Fn>> calls;
  const std::string key =
      fmt::format("{}|{}|{}|{}|{}", w.ndim(), opt.groups, fmt::join(opt.stride, ","),
                  fmt::join(opt.dilation, ","), fmt::join(opt.padding, ","));
  const Fn* f = nullptr;
  {
    const std::lock_guard<std::mutex> lock(mu);
    std::unique_ptr<Fn>& slot = calls[key];
    if (!slot)
      slot = std::make_unique<Fn>(
          [opt](Tensor a, Tensor b) { return conv_windows(a, b, opt); },
          FunctionOptions{.name = "conv2d", .grad_fxn = [opt](const auto& g, const auto& args) {
                            return conv_gradient(opt, g, args);
                          }});
    f = slot.get();
  }
  return (*f)(x, w);
}

}  // namespace

Tensor Tensor::conv2d(const Tensor& weight, const Tensor* bias, ConvOptions opt) const {
  const Dims xs = shape(), ws = weight.shape();
  if (xs.size() < 3 || xs.size() != ws.size())
    throw TensorError(
        fmt::format("conv2d: input ({}) and weight ({}) need the same rank, at least 3",
                    fmt::join(xs, ", "), fmt::join(ws, ", ")));
  const int64_t cin_total = xs[1], cout = ws[0], cin = ws[1], g = opt.groups;
  if (g < 1 || cout % g != 0 || g * cin != cin_total)
    throw TensorError(fmt::format(
        "conv2d: input shape ({}) does not match weight shape ({}) with groups={}: the input "
        "needs groups * {} = {} channels and the {} outputs must split into {} groups",
        fmt::join(xs, ", "), fmt::join(ws, ", "), g, cin, g * cin, cout, g));
  if (bias && (bias->ndim() != 1 || bias->shape()[0] != cout))
    throw TensorError(fmt::format("conv2d: the bias needs shape ({}), got ({})", cout,
                                  fmt::join(bias->shape(), ", ")));
  // (an input that is the weight itself is one CALL argument: differentiate the body instead)
  const bool differentiable = dtype().is_float() && weight.dtype().is_float();
  Tensor r = differentiable && uop() != weight.uop() ? conv_call(*this, weight, opt)
                                                     : conv_windows(*this, weight, opt);
  if (!bias) return r;
  Dims bshape(r.ndim(), 1);
  bshape[1] = cout;
  return r + bias->reshape(bshape);
}

namespace {
// conv_transpose2d once its shapes are checked: the convolution of the input, spread out by the
// stride and padded by the kernel's span less the padding, with the flipped weight. `staged`: the
// spread, padded input in a buffer first, so that the convolution reads no gated element (the
// gradient of conv2d: its output's gradient is read once per kernel position).
Tensor transposed_conv(const Tensor& input, const Tensor& weight, const Tensor* bias,
                       const ConvOptions& opt, const Dims& output_padding, bool staged) {
  const Dims xs = input.shape(), ws = weight.shape();
  const size_t n = ws.size() - 2;
  const int64_t g = opt.groups, cin = ws[0], rcout = ws[1];
  const Dims s = per_axis(opt.stride, n, "stride", "conv_transpose2d"),
             d = per_axis(opt.dilation, n, "dilation", "conv_transpose2d"),
             op = per_axis(output_padding, n, "output_padding", "conv_transpose2d");
  const auto pads = pool_pads(opt.padding, n, "conv_transpose2d");
  // the weight of the equivalent convolution: (groups * rcout, cin / groups, *kernel), flipped
  Dims grouped{g, cin / g, rcout}, flat{g * rcout, cin / g};
  std::vector<int> flips;
  for (size_t i = 0; i < n; ++i) {
    grouped.push_back(ws[2 + i]);
    flat.push_back(ws[2 + i]);
    flips.push_back(static_cast<int>(3 + i));
  }
  const Tensor w = weight.reshape(grouped).transpose(1, 2).flip(flips).reshape(flat);
  // a stride > 1 spreads the input out: s - 1 zeros after each element (none after the last)
  Tensor x = input;
  if (std::any_of(s.begin(), s.end(), [](int64_t v) { return v > 1; })) {
    Dims spread(xs.begin(), xs.begin() + 2), wide(xs.begin(), xs.begin() + 2);
    std::vector<std::pair<int64_t, int64_t>> zeros{{0, 0}, {0, 0}}, keep{{0, xs[0]}, {0, xs[1]}};
    for (size_t i = 0; i < n; ++i) {
      spread.insert(spread.end(), {xs[2 + i], 1});
      zeros.insert(zeros.end(), {{0, 0}, {0, s[i] - 1}});
      wide.push_back(xs[2 + i] * s[i]);
      keep.emplace_back(0, (xs[2 + i] - 1) * s[i] + 1);
    }
    x = x.reshape(spread).pad(zeros).reshape(wide).shrink(keep);
  }
  // padding of the equivalent convolution, (before, after) per spatial axis
  std::vector<std::pair<int64_t, int64_t>> around(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t span = (ws[2 + i] - 1) * d[i];
    around[i] = {span - pads[i].first, span - pads[i].second + op[i]};
  }
  const Tensor padded = x.pad(full_pads(xs.size(), around), 0.0);
  const ConvOptions same{.groups = g, .stride = {1}, .dilation = d, .padding = {0}};
  if (!staged) return padded.conv2d(w, bias, same);
  return padded.contiguous().conv2d(w, bias, same);
}
}  // namespace

Tensor Tensor::conv_transpose2d(const Tensor& weight, const Tensor* bias, ConvOptions opt,
                                Dims output_padding) const {
  const Dims xs = shape(), ws = weight.shape();
  if (xs.size() < 3 || xs.size() != ws.size())
    throw TensorError(
        fmt::format("conv_transpose2d: input ({}) and weight ({}) need the same rank, at least 3",
                    fmt::join(xs, ", "), fmt::join(ws, ", ")));
  const int64_t g = opt.groups, cin = ws[0];
  if (g < 1 || cin % g != 0 || xs[1] != cin)
    throw TensorError(fmt::format(
        "conv_transpose2d: input shape ({}) does not match weight shape ({}) with groups={}: the "
        "input needs {} channels, a multiple of the groups",
        fmt::join(xs, ", "), fmt::join(ws, ", "), g, cin));
  return transposed_conv(*this, weight, bias, opt, output_padding, false);
}

namespace {
// tinygrad's _apply_ceil_mode: more padding after each axis so that the last, partial window
// counts, but never a window that starts in the padding.
std::vector<std::pair<int64_t, int64_t>> ceil_mode_pads(
    std::vector<std::pair<int64_t, int64_t>> pads, const Dims& in, const Dims& k, const Dims& s,
    const Dims& d) {
  for (size_t i = 0; i < pads.size(); ++i) {
    auto& [b, a] = pads[i];
    const int64_t span = d[i] * (k[i] - 1) + 1;
    const int64_t o = ceil_div(in[i] + b + a - span, s[i]) + 1;
    a += s[i] * (o - 1) + span - (in[i] + b + a) -
         std::max<int64_t>(s[i] * (o - 1) - (b + in[i] - 1), 0);
  }
  return pads;
}

struct PoolShape {
  Dims k, s, d;
  std::vector<std::pair<int64_t, int64_t>> pads, plain_pads;  // with and without ceil mode
};

PoolShape pool_shape(const Tensor& t, const PoolOptions& o, std::string_view op) {
  const size_t n = o.kernel_size.size();
  if (n == 0 || n > t.ndim())
    throw TensorError(
        fmt::format("{}: a {}-d kernel for a tensor of {} dimensions", op, n, t.ndim()));
  PoolShape p;
  p.k = o.kernel_size;
  p.s = o.stride.empty() ? p.k : per_axis(o.stride, n, "stride", op);
  p.d = per_axis(o.dilation, n, "dilation", op);
  p.plain_pads = pool_pads(o.padding, n, op);
  const Dims shp = t.shape();
  const Dims in(shp.end() - static_cast<std::ptrdiff_t>(n), shp.end());
  p.pads = o.ceil_mode ? ceil_mode_pads(p.plain_pads, in, p.k, p.s, p.d) : p.plain_pads;
  return p;
}
}  // namespace

Tensor Tensor::max_pool2d(PoolOptions o) const { return max_pool2d_with_indices(o).first; }

std::pair<Tensor, Tensor> Tensor::max_pool2d_with_indices(PoolOptions o) const {
  const PoolShape p = pool_shape(*this, o, "max_pool2d");
  const size_t n = p.k.size();
  const std::vector<int> axes = trailing_axes(n);
  const Tensor windows = pad(full_pads(ndim(), p.pads), lowest(dtype())).pool(p.k, p.s, p.d);
  const Tensor best = windows.max(axes);
  // the first maximum: weights count down from the spatial size, as argmax's do
  const Dims shp = shape();
  const Dims spatial(shp.end() - static_cast<std::ptrdiff_t>(n), shp.end());
  int64_t size = 1;
  for (int64_t v : spatial) size *= v;
  const Tensor weights =
      (Tensor::full({size}, static_cast<double>(size), dtypes::int32) - arange(size))
          .reshape(spatial)
          .pad(full_pads(n, p.pads), lowest(dtypes::int32))
          .pool(p.k, p.s, p.d);
  const Tensor is_max = windows.eq(windows.max(axes, true)).cast(dtypes::int32);
  const Tensor index =
      Tensor::full({1}, static_cast<double>(size), dtypes::int32) - (is_max * weights).max(axes);
  return {best, index};
}

Tensor Tensor::avg_pool2d(PoolOptions o) const {
  const PoolShape p = pool_shape(*this, o, "avg_pool2d");
  const std::vector<int> axes = trailing_axes(p.k.size());
  auto windows = [&](const Tensor& t, const std::vector<std::pair<int64_t, int64_t>>& pads) {
    return t.pad(full_pads(t.ndim(), pads), 0.0).pool(p.k, p.s, p.d);
  };
  const Tensor x = cast(least_upper_float(dtype()));
  const Tensor ones = constant(shape(), 1, x.dtype());
  if (!o.count_include_pad) return windows(x, p.pads).sum(axes) / windows(ones, p.pads).sum(axes);
  if (!o.ceil_mode) return windows(x, p.pads).mean(axes);
  // ceil mode counts the user's padding but not the extra padding it adds
  std::vector<std::pair<int64_t, int64_t>> extra;
  for (size_t i = 0; i < p.pads.size(); ++i)
    extra.emplace_back(p.pads[i].first - p.plain_pads[i].first,
                       p.pads[i].second - p.plain_pads[i].second);
  Dims padded = shape();  // the shape the user's padding gives
  for (size_t i = 0; i < p.plain_pads.size(); ++i)
    padded[padded.size() - p.plain_pads.size() + i] +=
        p.plain_pads[i].first + p.plain_pads[i].second;
  const Tensor counted = constant(padded, 1, x.dtype());
  return windows(x, p.pads).sum(axes) / windows(counted, extra).sum(axes);
}

// ---- scans ------------------------------------------------------------------------------------

// Each output is a reduce over a window of the (identity-padded) input that ends at it.
Tensor Tensor::cumulative_one_stage(int ax, Op op) const {
  const int a = axis(ax);
  const int64_t n = shape()[static_cast<size_t>(a)];
  const Tensor t = transpose(a, -1);
  std::vector<std::pair<int64_t, int64_t>> pads(ndim(), {0, 0});
  pads.back() = {n - 1, 0};
  const Tensor windows = t.pad(pads, identity(op, dtype())).pool({n}, {1}, {1});
  return windows.reduce(op, {-1}, false).transpose(a, -1);
}

// Past 512 elements, as tinygrad: scans of 256-element chunks plus a scan of the chunk totals,
// rather than n windows of n elements.
Tensor Tensor::cumulative(int ax, Op op) const {
  if (ndim() == 0) return op == Op::Add ? cast(sum_acc_dtype(dtype())) : *this;
  const int a = axis(ax);
  const Dims s = shape();
  for (int64_t v : s)
    if (v == 0) return op == Op::Add ? cast(sum_acc_dtype(dtype())) : *this;
  constexpr int64_t kSplit = 256;
  const int64_t n = s[static_cast<size_t>(a)];
  if (n <= 2 * kSplit) return cumulative_one_stage(a, op);
  const int64_t rounded = ceil_div(n, kSplit) * kSplit;
  std::vector<std::pair<int64_t, int64_t>> front(ndim(), {0, 0});
  front.back() = {rounded - n, 0};
  Dims split = transpose(a, -1).shape();
  split.back() = rounded / kSplit;
  split.push_back(kSplit);
  const Tensor chunks = transpose(a, -1)
                            .pad(front, identity(op, dtype()))
                            .reshape(split)
                            .cumulative_one_stage(-1, op);
  // each chunk's running totals plus the total of every chunk before it
  std::vector<std::pair<int64_t, int64_t>> last, shift(split.size() - 1, {0, 0});
  for (int64_t v : split) last.emplace_back(0, v);
  last.back() = {kSplit - 1, kSplit};
  shift.back() = {1, -1};
  const Tensor totals = chunks.shrink(last).reshape(Dims(split.begin(), split.end() - 1));
  const Tensor before =
      totals.cumulative_one_stage(-1, op).pad(shift, identity(op, chunks.dtype())).unsqueeze(-1);
  const Tensor joined = op == Op::Add   ? chunks + before
                        : op == Op::Mul ? chunks * before
                                        : chunks.maximum(before);
  Dims flat(split.begin(), split.end() - 1);
  flat.back() = rounded;
  std::vector<std::pair<int64_t, int64_t>> tail(flat.size(), {0, 0});
  for (size_t i = 0; i + 1 < flat.size(); ++i) tail[i] = {0, flat[i]};
  tail.back() = {rounded - n, rounded};
  return joined.reshape(flat).shrink(tail).transpose(a, -1);
}

Tensor Tensor::cumsum(int ax) const { return cumulative(ax, Op::Add); }
Tensor Tensor::cumprod(int ax) const { return cumulative(ax, Op::Mul); }

std::pair<Tensor, Tensor> Tensor::cummax(int ax) const {
  if (ndim() == 0) return {*this, Tensor::zeros({}, dtypes::int32)};
  const Tensor values = cumulative(ax, Op::Max);
  const int a = axis(ax);
  const int64_t n = shape()[static_cast<size_t>(a)];
  if (n == 0) return {values, Tensor::zeros(shape(), dtypes::int32)};
  // match[..., i, j]: element i equals the running max at j, and i <= j; the first such i wins
  const Tensor x = transpose(a, -1), vt = values.transpose(a, -1);
  const Tensor match =
      x.unsqueeze(-1).eq(vt.unsqueeze(-2)).logical_and(Tensor::ones({n, n}, dtypes::bool_).triu());
  const Tensor weights = arange(n, 0, -1).reshape({n, 1});
  const Tensor first =
      (match.cast(dtypes::int32) * weights).max({-2}) * -1.0 + static_cast<double>(n);
  return {values, first.cast(dtypes::int32).transpose(-1, a)};
}

// ---- indexing ---------------------------------------------------------------------------------

Tensor Tensor::one_hot(int64_t num_classes) const {
  if (!dtype().is_int())
    throw TensorError(fmt::format("one_hot needs an integer tensor, got {}", dtype().name()));
  if (num_classes < 0)
    throw TensorError(
        fmt::format("one_hot: num_classes must not be negative, got {}", num_classes));
  const Tensor hot = unsqueeze(-1).eq(arange(num_classes));
  return hot.where(Tensor::full({}, 1, dtypes::int32), Tensor::full({}, 0, dtypes::int32));
}

Tensor Tensor::gather(int dim, const Tensor& index) const {
  if (!index.dtype().is_int())
    throw TensorError(
        fmt::format("gather: the index must be an integer tensor, got {}", index.dtype().name()));
  if (index.ndim() != ndim())
    throw TensorError(
        fmt::format("gather: the index has {} dimensions, the tensor {}", index.ndim(), ndim()));
  const int d = axis(dim);
  const Dims s = shape(), is = index.shape();
  std::vector<std::pair<int64_t, int64_t>> keep;
  for (size_t i = 0; i < s.size(); ++i) {
    if (static_cast<int>(i) != d && is[i] > s[i])
      throw TensorError(
          fmt::format("gather: the index's axis {} has {} elements, more than the tensor's {}", i,
                      is[i], s[i]));
    keep.emplace_back(0, static_cast<int>(i) == d ? s[i] : is[i]);
  }
  const int64_t n = s[static_cast<size_t>(d)];
  const Tensor x = shrink(keep).unsqueeze(-1).transpose(-1, d);
  const Tensor hot = index.unsqueeze(-1).eq(arange(n));
  return hot.where(x, x.scalar_like(0)).sum({-1}).cast(dtype());
}

Tensor Tensor::operator[](const Tensor& index) const {
  if (!index.dtype().is_int())
    throw TensorError(
        fmt::format("indexing needs an integer tensor, got {}", index.dtype().name()));
  if (ndim() == 0) throw TensorError("a 0-d tensor cannot be indexed");
  const Dims s = shape(), is = index.shape();
  const int64_t n = s[0];
  const Tensor i64 = index.cast(dtypes::int64);  // room for index + n
  const Tensor wrapped = i64.lt(i64.scalar_like(0)).where(i64 + static_cast<double>(n), i64);
  Dims hot_shape = is, x_shape(is.size(), 1);
  hot_shape.push_back(n);
  for (size_t i = 1; i < s.size(); ++i) hot_shape.push_back(1);
  x_shape.insert(x_shape.end(), s.begin(), s.end());
  const Tensor hot = wrapped.unsqueeze(-1).eq(arange(n)).reshape(hot_shape);
  return hot.where(reshape(x_shape), scalar_like(0))
      .sum({static_cast<int>(is.size())})
      .cast(dtype());
}

// ---- losses -----------------------------------------------------------------------------------

namespace {
Tensor reduced(const Tensor& t, Tensor::Reduction r) {
  switch (r) {
    case Tensor::Reduction::None:
      return t;
    case Tensor::Reduction::Sum:
      return t.sum();
    case Tensor::Reduction::Mean:
      return t.mean();
  }
  throw TensorError("unknown reduction");
}
void check_smoothing(double s, std::string_view op) {
  if (!(s >= 0 && s <= 1))
    throw TensorError(fmt::format("{}: label_smoothing must be in [0, 1], got {}", op, s));
}
}  // namespace

Tensor Tensor::sparse_categorical_crossentropy(const Tensor& labels, int64_t ignore_index,
                                               double smoothing, Reduction reduction) const {
  check_smoothing(smoothing, "sparse_categorical_crossentropy");
  const Dims s = shape();
  if (s.empty() || labels.shape() != Dims(s.begin(), s.end() - 1))
    throw TensorError(fmt::format(
        "sparse_categorical_crossentropy: labels of shape ({}) for logits of shape ({}): one "
        "label per row of the last axis",
        fmt::join(labels.shape(), ", "), fmt::join(shape(), ", ")));
  if (!labels.dtype().is_int())
    throw TensorError(fmt::format(
        "sparse_categorical_crossentropy: labels must be integers, got {}", labels.dtype().name()));
  const Tensor log_probs = log_softmax(-1);
  const Tensor counted = ignore_index != -1
                             ? labels.ne(labels.scalar_like(static_cast<double>(ignore_index)))
                             : Tensor::ones(labels.shape(), dtypes::bool_);
  const Tensor target =
      labels.unsqueeze(-1).eq(arange(s.back())).logical_and(counted.unsqueeze(-1));
  const Tensor mask = counted.cast(log_probs.dtype());
  const Tensor picked = (log_probs * target.cast(log_probs.dtype())).sum({-1});
  // without smoothing no mean term: 0 times a row's mean is NaN where a logit is -inf (a masked
  // class), and tinygrad's 0 * x folds it away
  const Tensor per_row =
      smoothing == 0 ? picked : picked * (1 - smoothing) + log_probs.mean({-1}) * mask * smoothing;
  if (reduction == Reduction::Mean) return -per_row.sum() / mask.sum();
  return -reduced(per_row, reduction);
}

Tensor Tensor::cross_entropy(const Tensor& y, Reduction reduction, double smoothing) const {
  check_smoothing(smoothing, "cross_entropy");
  if (ndim() == 0) throw TensorError("cross_entropy needs logits of at least one dimension");
  const int classes = ndim() == 1 ? 0 : 1;
  const int64_t c = shape()[static_cast<size_t>(classes)];
  Tensor target = y;
  if (y.shape() != shape()) {
    Dims labels = shape();
    labels.erase(labels.begin() + classes);
    if (y.shape() != labels)
      throw TensorError(fmt::format(
          "cross_entropy: targets of shape ({}) for logits of shape ({}): give class "
          "probabilities of the logits' shape or labels of shape ({})",
          fmt::join(y.shape(), ", "), fmt::join(shape(), ", "), fmt::join(labels, ", ")));
    if (!y.dtype().is_int())
      throw TensorError(
          fmt::format("cross_entropy: labels must be integers, got {}", y.dtype().name()));
    Dims column(static_cast<size_t>(ndim()), 1);
    column[static_cast<size_t>(classes)] = c;
    target = y.unsqueeze(classes).eq(arange(c).reshape(column));
  }
  const Tensor lp = log_softmax(classes);
  target = target.cast(lp.dtype()) * (1 - smoothing) + smoothing / static_cast<double>(c);
  return reduced(-(lp * target).sum({classes}), reduction);
}

Tensor Tensor::binary_crossentropy(const Tensor& y, Reduction reduction) const {
  const Tensor p = cast(least_upper_float(dtype()));
  const Tensor t = y.cast(p.dtype());
  return reduced(-t * p.log() - (-t + 1.0) * (-p + 1.0).log(), reduction);
}

// ---- normalization ----------------------------------------------------------------------------

Tensor Tensor::batchnorm(const Tensor* weight, const Tensor* bias, const Tensor& mean,
                         const Tensor& invstd, std::vector<int> axes) const {
  std::vector<bool> on(ndim(), false);
  for (int a : axes) on[static_cast<size_t>(axis(a))] = true;
  Dims per_channel;
  const Dims s = shape();
  for (size_t i = 0; i < s.size(); ++i) per_channel.push_back(on[i] ? s[i] : 1);
  Tensor x = *this - mean.reshape(per_channel);
  if (weight) x = x * weight->reshape(per_channel);
  x = x * (invstd.ndim() == axes.size() ? invstd.reshape(per_channel) : invstd);
  return bias ? x + bias->reshape(per_channel) : x;
}

Tensor Tensor::layernorm(std::vector<int> axes, double eps) const {
  const Tensor y = *this - mean(axes, true);
  return y * ((y * y).mean(axes, true) + eps).rsqrt();
}

bool Tensor::training() { return g_training.load(); }
void Tensor::set_training(bool on) { g_training.store(on); }
void Tensor::manual_seed(uint64_t seed) { g_next_seed.store(seed); }
uint64_t Tensor::next_seed() { return g_next_seed.fetch_add(1); }

Tensor Tensor::dropout(double p) const {
  if (!(p >= 0 && p <= 1)) throw TensorError(fmt::format("dropout: p={} is outside [0, 1]", p));
  if (!training() || p == 0) return *this;
  if (p == 1) return scalar_like(0);
  const Tensor keep = rand(shape(), next_seed()).ge(Tensor::full({}, p));
  return keep.where(*this, scalar_like(0)) / (1.0 - p);
}

}  // namespace tinyrw

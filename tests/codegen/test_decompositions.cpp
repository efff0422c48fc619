// The late decompositions (rules/decompositions.rw, rules/transcendental.rw) for each target
// (codegen/target.h): what a program keeps for its renderer, and the values of what they
// decompose, against the C library and plain integer division, on both devices (INTERP with
// TRANSCENDENTAL=2, which decomposes on every target).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>

#include "codegen/linearize.h"
#include "codegen/target.h"
#include "ir/call.h"
#include "on_device.h"
#include "tensor/function.h"
#include "tensor/tensor.h"
#include "tests/scoped_env.h"

using namespace tinyrw;

namespace {

// The distance in representable values between a and b (0 for two NaNs or equal values).
template <class F>
int64_t ulps(F a, F b) {
  using I = std::conditional_t<sizeof(F) == 4, int32_t, int64_t>;
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b))
    return std::numeric_limits<int64_t>::max();
  auto ordered = [](F v) {
    const I i = std::bit_cast<I>(v);
    return i < 0 ? std::numeric_limits<I>::min() - i : i;
  };
  const __int128 x = ordered(a), y = ordered(b), d = x > y ? x - y : y - x;  // never wraps
  return d > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max()
                                                 : static_cast<int64_t>(d);
}

// Inputs over every magnitude, both signs, denormals and the special values.
template <class F>
std::vector<F> sweep() {
  std::vector<F> xs = {0,
                       -0.0,
                       1,
                       -1,
                       0.5,
                       3.14159265358979,
                       1e-3,
                       29.9,
                       30.1,
                       127.9,
                       128,
                       -149,
                       -151,
                       1000,
                       12345.678,
                       1e10,
                       -1e10,
                       1e30,
                       -1e30,
                       std::numeric_limits<F>::denorm_min(),
                       std::numeric_limits<F>::min(),
                       std::numeric_limits<F>::max(),
                       std::numeric_limits<F>::infinity(),
                       -std::numeric_limits<F>::infinity(),
                       std::numeric_limits<F>::quiet_NaN()};
  std::mt19937 g(7);
  std::uniform_real_distribution<double> m(1, 2);
  for (int e = -40; e <= 40; ++e)
    for (int k = 0; k < 12; ++k)
      xs.push_back(static_cast<F>(std::ldexp(m(g), e) * (k % 3 ? 1 : -1)));
  return xs;
}

class Decomposed : public OnDevice {
 protected:
  // INTERP renders every op: decomposing there takes TRANSCENDENTAL=2
  void SetUp() override {
    OnDevice::SetUp();
    if (GetParam() == "INTERP") forced_.emplace("TRANSCENDENTAL", "2");
  }
  void TearDown() override {
    forced_.reset();
    OnDevice::TearDown();
  }

 private:
  std::optional<ScopedEnv> forced_;
};

// exp2 and log2 within 1 ULP of the C library's (correctly rounded from double) in float32,
// and sin within 2^-22 of it below 2^20 (tinygrad's polynomials: its Payne-Hanek reduction keeps
// an absolute error, not a relative one, where sin is near 0); the special values exactly.
TEST_P(Decomposed, Float32TranscendentalsMatchTheCLibrary) {
  const std::vector<float> xs = sweep<float>();
  const Tensor t = Tensor::from_vector(xs, {static_cast<int64_t>(xs.size())});
  const std::vector<float> e = t.exp2().data<float>(), l = t.log2().data<float>(),
                           s = t.sin().data<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    EXPECT_LE(ulps(e[i], static_cast<float>(std::exp2(x))), 1) << "exp2 " << x << " " << e[i];
    EXPECT_LE(ulps(l[i], static_cast<float>(std::log2(x))), 1) << "log2 " << x << " " << l[i];
    const float want = static_cast<float>(std::sin(x));
    if (std::isfinite(x) && std::fabs(x) < 1048576.0)
      EXPECT_NEAR(s[i], want, std::ldexp(1.0, -22)) << "sin " << x;
    else if (!std::isfinite(x))
      EXPECT_TRUE(std::isnan(s[i])) << "sin " << x;
  }
}

// float64: exp2 and log2 within 1 ULP; sin too (the C library's on CPU: codegen/target.h)
TEST_P(Decomposed, Float64TranscendentalsMatchTheCLibrary) {
  const std::vector<double> xs = sweep<double>();
  const Tensor t = Tensor::from_vector(xs, {static_cast<int64_t>(xs.size())}, dtypes::float64);
  const std::vector<double> e = t.exp2().data<double>(), l = t.log2().data<double>(),
                            s = t.sin().data<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    EXPECT_LE(ulps(e[i], std::exp2(x)), 1) << "exp2 " << x << " " << e[i];
    EXPECT_LE(ulps(l[i], std::log2(x)), 1) << "log2 " << x << " " << l[i];
    if (std::isfinite(x) && std::fabs(x) < 1e9)
      EXPECT_NEAR(s[i], std::sin(x), 1e-15) << "sin " << x;
    else if (!std::isfinite(x))
      EXPECT_TRUE(std::isnan(s[i])) << "sin " << x;
  }
  // far beyond 2^32 only on CPU, whose float64 sin is the C library's
  if (GetParam() == "CPU") {
    const std::vector<double> big = {1e15, 1e30, 1e100};
    const std::vector<double> got =
        Tensor::from_vector(big, {3}, dtypes::float64).sin().data<double>();
    for (size_t i = 0; i < big.size(); ++i) EXPECT_EQ(got[i], std::sin(big[i])) << big[i];
  }
}

// half computes in float32 and rounds once
TEST_P(Decomposed, HalfTranscendentalsComputeInFloat32) {
  const std::vector<float> xs = {0.25f, -3.5f, 10.f, 0.001f, 15.5f};
  const Tensor h = Tensor::from_vector(xs, {5}).cast(dtypes::float16);
  const std::vector<double> e = h.exp2().cast(dtypes::float32).to_doubles(),
                            s = h.sin().cast(dtypes::float32).to_doubles();
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_NEAR(e[i], std::exp2(xs[i]), 1e-3 * std::exp2(xs[i])) << xs[i];
    EXPECT_NEAR(s[i], std::sin(xs[i]), 2e-3) << xs[i];
  }
}

// Integer division and modulo of loaded values by constants, positive and negative (multiply
// and shift where the dtype cannot be negative, shifts for powers of two, the floor correction
// where the signs differ) equal plain division, in every integer width. (A signed value that is
// never negative, index math, is DecompositionTargets' below.)
TEST_P(Decomposed, DivisionByConstantsEqualsPlainDivision) {
  std::mt19937 g(3);
  for (DType d : {dtypes::uint8, dtypes::uint16, dtypes::uint32, dtypes::uint64, dtypes::int8,
                  dtypes::int16, dtypes::int32, dtypes::int64}) {
    const bool wide = d.itemsize() == 8;
    const int64_t hi = wide ? 4000000000 : static_cast<int64_t>(d.int_max()),
                  lo = d.is_unsigned() ? 0
                       : wide          ? -4000000000
                                       : -hi - 1;
    std::vector<int64_t> xs = {lo, hi, 0, 1, d.is_unsigned() ? 2 : -1, 126};
    std::uniform_int_distribution<int64_t> u(lo, hi);
    for (int k = 0; k < 300; ++k) xs.push_back(u(g));
    Tensor x = Tensor::from_vector(xs, {static_cast<int64_t>(xs.size())}, d);
    const std::vector<int64_t> in = x.data<int64_t>();
    for (int64_t c : {3, 7, 10, 64, 100, 641, 65537, -3, -7, -64}) {
      if (c > hi || (c < 0 && d.is_unsigned())) continue;  // the constant must fit the dtype
      const Tensor k = Tensor::full({static_cast<int64_t>(xs.size())}, static_cast<double>(c), d);
      const std::vector<int64_t> gotc = Tensor::alu(Op::CDiv, {x, k}).data<int64_t>(),
                                 getm = Tensor::alu(Op::CMod, {x, k}).data<int64_t>(),
                                 gotf = Tensor::alu(Op::FloorDiv, {x, k}).data<int64_t>(),
                                 getf = Tensor::alu(Op::FloorMod, {x, k}).data<int64_t>();
      for (size_t i = 0; i < in.size(); ++i) {
        const int64_t q = in[i] / c, r = in[i] % c;
        const bool down = r != 0 && (r < 0) != (c < 0);  // floor is one lower
        const std::string at = d.repr() + " " + std::to_string(in[i]) + ", " + std::to_string(c);
        EXPECT_EQ(gotc[i], q) << "CDiv " << at;
        EXPECT_EQ(getm[i], r) << "CMod " << at;
        EXPECT_EQ(gotf[i], down ? q - 1 : q) << "FloorDiv " << at;
        EXPECT_EQ(getf[i], down ? r + c : r) << "FloorMod " << at;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Decomposed, ::testing::ValuesIn(test_devices()),
                         device_test_name);

// ---- what each target's programs keep

// out[r] = r // 7 (+ exp2(in[r]) + log2(in[r]) with `transcendental`) over an n-element range:
// the index math divides a never negative range, the rest a loaded float.
UOp kernel_with_division(int64_t n, Op div, bool transcendental = true) {
  const UOp in = param_like(Tensor::full({n}, 0.0).uop(), 1),
            out = param_like(Tensor::full({n}, 0.0).uop(), 0);
  const UOp r = UOp::range(UOp::cint(n), 0);
  UOp value = r.alu(div, {UOp::cint(7)}).cast(dtypes::float32);
  const UOp v = kernel_index(in, {r});
  if (transcendental)
    value = value.alu(Op::Add, {v.alu(Op::Exp2, {})}).alu(Op::Add, {v.alu(Op::Log2, {})});
  return kernel_sink({kernel_end(kernel_store(kernel_index(out, {r}), value), {r})}, "k");
}
std::vector<Op> ops_of(const UOp& sink, const std::string& device) {
  const UOp program = linearize_kernel(bind_kernel(sink, param_buffers(sink)), Target::of(device));
  std::vector<Op> out;
  for (const UOp& u : program.src()) out.push_back(u.op());
  return out;
}
bool has(const std::vector<Op>& ops, Op op) { return std::ranges::find(ops, op) != ops.end(); }

TEST(DecompositionTargets, CpuProgramsKeepOnlyWhatLlvmRenders) {
  SKIP_WHERE_INTERP_RUNS_GPU_KERNELS("INTERP");
  for (Op div : {Op::FloorDiv, Op::CDiv}) {
    const std::vector<Op> cpu = ops_of(kernel_with_division(1000, div), "CPU");
    for (Op gone : {Op::FloorDiv, Op::FloorMod, Op::CDiv, Op::Exp2, Op::Log2})
      EXPECT_FALSE(has(cpu, gone)) << op_name(gone);
    // the quotient is a multiply and a shift
    const std::vector<Op> division = ops_of(kernel_with_division(1000, div, false), "CPU");
    EXPECT_TRUE(has(division, Op::Shr));
    EXPECT_TRUE(has(division, Op::Mul));
    EXPECT_FALSE(has(division, Op::CDiv));
  }
  const std::vector<Op> interp = ops_of(kernel_with_division(1000, Op::FloorDiv), "INTERP");
  EXPECT_TRUE(has(interp, Op::Exp2));
  EXPECT_TRUE(has(interp, Op::Log2));
  // a floor division whose signs agree truncates, a multiply and shift, on every target
  EXPECT_FALSE(has(interp, Op::FloorDiv));
  {
    const ScopedEnv forced("TRANSCENDENTAL", "2");
    const std::vector<Op> forced_interp =
        ops_of(kernel_with_division(1000, Op::FloorDiv), "INTERP");
    EXPECT_FALSE(has(forced_interp, Op::Exp2));
    EXPECT_FALSE(has(forced_interp, Op::Log2));
  }
  {
    const ScopedEnv off("DISABLE_FAST_IDIV", "1");
    EXPECT_TRUE(has(ops_of(kernel_with_division(1000, Op::CDiv), "CPU"), Op::CDiv));
  }
}

// An int32 index whose product with the magic multiplier leaves int32: the quotient multiplies
// in int64 and stays exact.
TEST(DecompositionTargets, FastDivisionWidensWhereTheProductOverflows) {
  const int64_t n = 5000;
  auto body = [&](const std::vector<UOp>& p) {
    const UOp r = UOp::range(UOp::cint(n), 0);
    const UOp x = r.alu(Op::Mul, {UOp::cint(429000)});  // up to 2.14e9: int32
    const UOp q = x.alu(Op::CDiv, {UOp::cint(641)});
    return kernel_sink(
        {kernel_end(kernel_store(kernel_index(p[0], {r}), q.cast(dtypes::int64)), {r})}, "wide");
  };
  const UOp out_param = param_like(Tensor::full({n}, 0.0, dtypes::int64).uop(), 0);
  const std::vector<Op> cpu = ops_of(body({out_param}), "CPU");
  EXPECT_FALSE(has(cpu, Op::CDiv));
  struct OnCpu {
    OnCpu() { set_default_device("CPU"); }
    ~OnCpu() { set_default_device(""); }
  } on_cpu;
  Tensor out = Tensor::from_vector(std::vector<int64_t>(n, 0), {n}, dtypes::int64);
  const std::vector<int64_t> v = custom_kernel({out}, body)[0].data<int64_t>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i * 429000 / 641) << i;
}

}  // namespace

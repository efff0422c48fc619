// Kernels in tinygrad's kernel-AST form, run through the custom-kernel entry point on both
// devices (both run codegen/linearize.cpp's LINEAR program: INTERP executes it, CPU renders it with
// runtime/llvm_render.cpp):
//   SINK(END(STORE(INDEX(PARAM0, flat), value), r0, r1, ...))
// where the value reads INDEX(PARAMk, flat), may hold REDUCE(value, rR...) with arg (op, 0), and
// a padded read has the gated index where(valid, i, Invalid) inside its own where(valid, x, 0).
// Each kernel's result equals the same computation written as plain loops here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "codegen/index_proof.h"
#include "codegen/kernel_name.h"
#include "codegen/linearize.h"
#include "codegen/opt.h"
#include "ir/axis.h"
#include "ir/builders.h"
#include "ir/call.h"
#include "ir/graph.h"
#include "ir/kernel_info.h"
#include "ir/render.h"
#include "on_device.h"
#include "runtime/gpu_compile.h"
#include "runtime/interp.h"
#include "runtime/llvm_render.h"
#include "runtime/storage.h"
#include "schedule/rangeify.h"
#include "tensor/function.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"
#include "tests/scoped_env.h"

using namespace tinyrw;

namespace {

class KernelAst : public OnDevice {};

using D = std::vector<double>;
using Params = std::vector<UOp>;

UOp rng(int64_t n, int axis) { return UOp::range(UOp::cint(n), axis); }
UOp ci(int64_t v) { return UOp::cint(v); }
// PARAM read or written at one flat index (a kernel AST's INDEX)
UOp at(const UOp& p, const UOp& flat) { return kernel_index(p, {flat}); }
// REDUCE with the kernel AST's arg (op, 0)
UOp reduce(Op op, const UOp& v, std::initializer_list<UOp> ranges) {
  std::vector<UOp> src{v};
  src.insert(src.end(), ranges.begin(), ranges.end());
  return UOp::make(Op::Reduce, v.dtype(), src, Arg::tuple({Arg::op(op), Arg::integer(0)}));
}
UOp invalid() { return UOp::constant(dtypes::index, Arg::invalid()); }
// The gated read of a pad: p[i] where valid holds, 0 elsewhere (tinygrad's convert_pad_to_where
// form: the index is gated and the value keeps its own where)
UOp padded_read(const UOp& p, const UOp& valid, const UOp& i) {
  const UOp x = at(p, valid.where(i, invalid()));
  return valid.where(x, x.const_like(Arg::integer(0)));
}
UOp ast(const UOp& store, std::initializer_list<UOp> ranges) {
  return kernel_sink({kernel_end(store, ranges)}, "test");
}

// Small integers: every sum below is exact in float, so the loops' values are the kernels'.
std::vector<float> ints(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<float> v;
  for (int64_t k = 0; k < n; ++k)
    v.push_back(static_cast<float>(std::uniform_int_distribution<int>(-3, 3)(g)));
  return v;
}
Tensor tensor(const std::vector<float>& v, Dims shape, DType dt = dtypes::float32) {
  return Tensor::from_vector(v, std::move(shape)).cast(dt).realize();
}
D doubles(const std::vector<float>& v) { return D(v.begin(), v.end()); }

}  // namespace

// a.sum() over (16, 16): no output range, two REDUCE ranges
TEST_P(KernelAst, FullSum) {
  const std::vector<float> a = ints(256, 1);
  auto k = [](const Params& p) {
    const UOp r0 = rng(16, 0), r1 = rng(16, 1);
    return kernel_sink(
        {kernel_store(at(p[0], ci(0)), reduce(Op::Add, at(p[1], r0 * ci(16) + r1), {r0, r1}))},
        "r_16_16");
  };
  double sum = 0;
  for (float x : a) sum += x;
  EXPECT_EQ(custom_kernel({Tensor::empty({1}), tensor(a, {16, 16})}, k)[0].to_doubles(), (D{sum}));
}

// a.sum(1) over (16, 32), in float32, float16 and bfloat16 (stored through their conversions)
TEST_P(KernelAst, RowSum) {
  const std::vector<float> a = ints(16 * 32, 2);
  auto k = [](const Params& p) {
    const UOp r0 = rng(16, 0), r1 = rng(32, 1);
    return ast(kernel_store(at(p[0], r0), reduce(Op::Add, at(p[1], r0 * ci(32) + r1), {r1})), {r0});
  };
  D want(16, 0);
  for (int64_t i = 0; i < 16; ++i)
    for (int64_t j = 0; j < 32; ++j) want[i] += a[i * 32 + j];
  for (DType dt : {dtypes::float32, dtypes::float16, dtypes::bfloat16}) {
    SCOPED_TRACE(dt.repr());
    EXPECT_EQ(custom_kernel({Tensor::empty({16}, dt), tensor(a, {16, 32}, dt)}, k)[0].to_doubles(),
              want);
  }
}

// A float16 / bfloat16 REDUCE rounds its accumulator after every step, as INTERP rounds every
// result: 1 plus ten 0.0004s (under half the spacing at 1) stays 1, for one sum and for rows
// (accumulating in float would give 1.0039)
TEST_P(KernelAst, HalfAccumulatorRoundsEveryStep) {
  std::vector<float> v{1};
  v.resize(11, 0.0004f);
  auto sum = [](const Params& p) {
    const UOp r0 = rng(11, 0);
    return kernel_sink({kernel_store(at(p[0], ci(0)), reduce(Op::Add, at(p[1], r0), {r0}))});
  };
  auto rows = [](const Params& p) {
    const UOp r0 = rng(3, 0), r1 = rng(11, 1);
    return ast(kernel_store(at(p[0], r0), reduce(Op::Add, at(p[1], r1), {r1})), {r0});
  };
  for (DType dt : {dtypes::float16, dtypes::bfloat16}) {
    SCOPED_TRACE(dt.repr());
    EXPECT_EQ(custom_kernel({Tensor::empty({1}, dt), tensor(v, {11}, dt)}, sum)[0].to_doubles(),
              (D{1}));
    EXPECT_EQ(custom_kernel({Tensor::empty({3}, dt), tensor(v, {11}, dt)}, rows)[0].to_doubles(),
              (D{1, 1, 1}));
  }
}

// a.max(1) and a.prod(1): the other REDUCE ops
TEST_P(KernelAst, RowMaxAndProduct) {
  const std::vector<float> a = ints(4 * 5, 3);
  for (Op op : {Op::Max, Op::Mul}) {
    SCOPED_TRACE(op_name(op));
    auto k = [op](const Params& p) {
      const UOp r0 = rng(4, 0), r1 = rng(5, 1);
      return ast(kernel_store(at(p[0], r0), reduce(op, at(p[1], r0 * ci(5) + r1), {r1})), {r0});
    };
    D want;
    for (int64_t i = 0; i < 4; ++i) {
      double v = a[i * 5];
      for (int64_t j = 1; j < 5; ++j)
        v = op == Op::Max ? std::max<double>(v, a[i * 5 + j]) : v * a[i * 5 + j];
      want.push_back(v);
    }
    EXPECT_EQ(custom_kernel({Tensor::empty({4}), tensor(a, {4, 5})}, k)[0].to_doubles(), want);
  }
}

UOp matmul_ast(const Params& p, int64_t m, int64_t kk, int64_t n) {
  const UOp r0 = rng(m, 0), r1 = rng(n, 1), r2 = rng(kk, 2);
  const UOp prod = at(p[1], r0 * ci(kk) + r2) * at(p[2], r2 * ci(n) + r1);
  return ast(kernel_store(at(p[0], r0 * ci(n) + r1), reduce(Op::Add, prod, {r2})), {r0, r1});
}

// (4, 64) @ (64, 8): tinygrad's r_4_8_64
TEST_P(KernelAst, Matmul) {
  const std::vector<float> a = ints(4 * 64, 4), b = ints(64 * 8, 5);
  D want(4 * 8, 0);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 8; ++j)
      for (int64_t k = 0; k < 64; ++k) want[i * 8 + j] += a[i * 64 + k] * b[k * 8 + j];
  Tensor c = custom_kernel({Tensor::empty({4, 8}), tensor(a, {4, 64}), tensor(b, {64, 8})},
                           [](const Params& p) { return matmul_ast(p, 4, 64, 8); })[0];
  EXPECT_EQ(c.to_doubles(), want);
}

// The devices read a RANGE's bound from its source, never its arg, and no SINK arg: RANGEs with
// tinygrad's (id, axis type) args and a KernelInfo record with more fields run the same matmul
TEST_P(KernelAst, RangeArgsAndKernelInfoDoNotMatter) {
  const std::vector<float> a = ints(4 * 6, 14), b = ints(6 * 5, 15);
  auto typed = [](int64_t n, int id, const char* type) {
    return UOp::make(Op::Range, dtypes::index, {ci(n)},
                     Arg::tuple({Arg::integer(id), Arg::string(type)}));
  };
  auto k = [&](const Params& p) {
    const UOp r0 = typed(4, 0, "WEAK"), r1 = typed(5, 1, "WEAK"), r2 = typed(6, 2, "REDUCE");
    const UOp prod = at(p[1], r0 * ci(6) + r2) * at(p[2], r2 * ci(5) + r1);
    const UOp end =
        kernel_end(kernel_store(at(p[0], r0 * ci(5) + r1), reduce(Op::Add, prod, {r2})), {r0, r1});
    return UOp::make(Op::Sink, dtypes::void_, {end},
                     Arg::record("KernelInfo", {{"name", Arg::string("r_4_5_6")},
                                                {"applied_opts", Arg::tuple({})},
                                                {"dont_use_locals", Arg::boolean(false)}}));
  };
  D want(4 * 5, 0);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t kk = 0; kk < 6; ++kk) want[i * 5 + j] += a[i * 6 + kk] * b[kk * 5 + j];
  EXPECT_EQ(custom_kernel({Tensor::empty({4, 5}), tensor(a, {4, 6}), tensor(b, {6, 5})}, k)[0]
                .to_doubles(),
            want);
}

// The second kernel of a - a.sum(1) on (4, 4): the reduced buffer read broadcast (tinygrad's
// E_4_4: INDEX(PARAM1, r0*4+r1) + INDEX(PARAM2, r1) * -1)
TEST_P(KernelAst, ElementwiseReadingAReducedBuffer) {
  const std::vector<float> a = ints(16, 6);
  std::vector<float> s(4, 0);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) s[i] += a[i * 4 + j];
  auto k = [](const Params& p) {
    const UOp r0 = rng(4, 0), r1 = rng(4, 1), i = r0 * ci(4) + r1;
    const UOp s1 = at(p[2], r1);
    return ast(kernel_store(at(p[0], i), at(p[1], i) + s1 * s1.const_like(-1.0)), {r0, r1});
  };
  D want;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) want.push_back(a[i * 4 + j] - s[j]);
  EXPECT_EQ(
      custom_kernel({Tensor::empty({4, 4}), tensor(a, {4, 4}), tensor(s, {4})}, k)[0].to_doubles(),
      want);
}

// a.pad(((1, 1),)) + 1 on (8,) (tinygrad's E_10) and a 2-D pad of (3, 4) to (5, 6) read at one
// flat index: the gated index leaves the buffer only where the gate does not hold
TEST_P(KernelAst, PaddedRead) {
  const std::vector<float> a = ints(8, 7);
  auto k1 = [](const Params& p) {
    const UOp r0 = rng(10, 0), valid = r0.ge(ci(1)) & r0.lt(ci(9));
    const UOp x = padded_read(p[1], valid, r0 - ci(1));
    return ast(kernel_store(at(p[0], r0), x + x.const_like(1.0)), {r0});
  };
  D want{1};
  for (float x : a) want.push_back(x + 1);
  want.push_back(1);
  EXPECT_EQ(custom_kernel({Tensor::empty({10}), tensor(a, {8})}, k1)[0].to_doubles(), want);

  const std::vector<float> b = ints(12, 8);
  auto k2 = [](const Params& p) {
    const UOp r0 = rng(5, 0), r1 = rng(6, 1);
    const UOp valid = r0.ge(ci(1)) & r0.lt(ci(4)) & ci(0).lt(r1) & r1.le(ci(4));
    return ast(kernel_store(at(p[0], r0 * ci(6) + r1),
                            padded_read(p[1], valid, (r0 - ci(1)) * ci(4) + (r1 - ci(1)))),
               {r0, r1});
  };
  D want2;
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 6; ++j)
      want2.push_back(i >= 1 && i < 4 && j >= 1 && j < 5 ? b[(i - 1) * 4 + (j - 1)] : 0);
  EXPECT_EQ(custom_kernel({Tensor::empty({5, 6}), tensor(b, {3, 4})}, k2)[0].to_doubles(), want2);
  // the same pad with one gated index per axis (a custom kernel's row-major indexing)
  auto k3 = [](const Params& p) {
    const UOp r0 = rng(5, 0), r1 = rng(6, 1);
    const UOp v0 = r0.ge(ci(1)) & r0.lt(ci(4)), v1 = r1.ge(ci(1)) & r1.lt(ci(5));
    const UOp x =
        kernel_index(p[1], {v0.where(r0 - ci(1), invalid()), v1.where(r1 - ci(1), invalid())});
    return ast(kernel_store(kernel_index(p[0], {r0, r1}), (v0 & v1).where(x, x.const_like(0.0))),
               {r0, r1});
  };
  EXPECT_EQ(custom_kernel({Tensor::empty({5, 6}), tensor(b, {3, 4})}, k3)[0].to_doubles(), want2);
}

// Padded reads inside a reduction: the sum of each row of a padded (3, 4) -> (3, 6), a convolution
TEST_P(KernelAst, PaddedReadInsideAReduce) {
  const std::vector<float> a = ints(12, 9);
  auto k = [](const Params& p) {
    const UOp r0 = rng(3, 0), r1 = rng(6, 1), valid = r1.ge(ci(1)) & r1.lt(ci(5));
    const UOp x = padded_read(p[1], valid, r0 * ci(4) + r1 - ci(1));
    return ast(kernel_store(at(p[0], r0), reduce(Op::Add, x, {r1})), {r0});
  };
  D want(3, 0);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) want[i] += a[i * 4 + j];
  EXPECT_EQ(custom_kernel({Tensor::empty({3}), tensor(a, {3, 4})}, k)[0].to_doubles(), want);
  // a 1-D convolution over x padded by 1 on each side: the gate bounds the window's position
  // r0 + r1, not either range alone
  const std::vector<float> x = ints(8, 12), w = ints(3, 13);
  auto conv = [](const Params& p) {
    const UOp r0 = rng(8, 0), r1 = rng(3, 1), pos = r0 + r1;
    const UOp valid = pos.ge(ci(1)) & pos.lt(ci(9));
    return ast(
        kernel_store(at(p[0], r0),
                     reduce(Op::Add, padded_read(p[1], valid, pos - ci(1)) * at(p[2], r1), {r1})),
        {r0});
  };
  D want_conv(8, 0);
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t k = 0; k < 3; ++k)
      if (i + k >= 1 && i + k < 9) want_conv[i] += x[i + k - 1] * w[k];
  EXPECT_EQ(
      custom_kernel({Tensor::empty({8}), tensor(x, {8}), tensor(w, {3})}, conv)[0].to_doubles(),
      want_conv);
}

// xs = X[2:6]; xs.assign(xs + 1): the store and the read are the very same INDEX node
TEST_P(KernelAst, InPlaceSliceAdd) {
  const std::vector<float> x = ints(8, 10);
  auto k = [](const Params& p) {
    const UOp r0 = rng(4, 0), el = at(p[0], r0 + ci(2));
    return ast(kernel_store(el, el + el.const_like(1.0)), {r0});
  };
  D want = doubles(x);
  for (int64_t i = 2; i < 6; ++i) want[i] += 1;
  EXPECT_EQ(custom_kernel({tensor(x, {8})}, k)[0].to_doubles(), want);
}

// A kernel that reads a buffer it stores to at other elements is refused: its loops run in no
// defined order (the reduction may run once, before any store, or once per element)
TEST_P(KernelAst, ReadingOtherElementsOfTheStoredBufferIsRefused) {
  const std::vector<float> x = ints(4, 11);
  auto k = [](const Params& p) {
    const UOp r0 = rng(4, 0), r1 = rng(4, 1);
    return ast(kernel_store(at(p[0], r0), reduce(Op::Add, at(p[0], r1), {r1})), {r0});
  };
  expect_error([&] { custom_kernel({tensor(x, {4})}, k)[0].realize(); },
               "is read at other elements than the ones the kernel writes");
}

// Integer division by zero inside a kernel AST raises on both devices
TEST_P(KernelAst, DivisionByZeroRaises) {
  const Tensor n = Tensor::from_vector(std::vector<int32_t>{6, 7}, {2}, dtypes::int32).realize();
  const Tensor d = Tensor::from_vector(std::vector<int32_t>{3, 0}, {2}, dtypes::int32).realize();
  auto k = [](const Params& p) {
    const UOp r0 = rng(2, 0), r1 = rng(2, 1);
    return ast(kernel_store(at(p[0], r0),
                            reduce(Op::Add, at(p[1], r1).alu(Op::CDiv, {at(p[2], r1)}), {r1})),
               {r0});
  };
  Tensor out = custom_kernel({Tensor::empty({2}, dtypes::int32), n, d}, k)[0];
  expect_error([&] { out.realize(); }, "integer division by zero");
  // in place: the buffer the failed kernel wrote keeps its old contents
  Tensor x = Tensor::from_vector(std::vector<int32_t>{6, 7}, {2}, dtypes::int32).realize();
  auto in_place = [](const Params& p) {
    const UOp r0 = rng(2, 0), el = at(p[0], r0);
    return ast(kernel_store(el, el.alu(Op::CDiv, {at(p[1], r0)})), {r0});
  };
  Tensor y = custom_kernel({x, d}, in_place)[0];
  expect_error([&] { y.realize(); }, "integer division by zero");
  EXPECT_EQ(x.to_doubles(), (D{6, 7}));
}

// A zero-size output: the loops never run
TEST_P(KernelAst, ZeroSizeOutput) {
  auto k = [](const Params& p) {
    const UOp r0 = rng(0, 0), r1 = rng(4, 1);
    return ast(kernel_store(at(p[0], r0), reduce(Op::Add, at(p[1], r0 * ci(4) + r1), {r1})), {r0});
  };
  EXPECT_EQ(custom_kernel({Tensor::empty({0}), Tensor::empty({0, 4})}, k)[0].to_doubles(), D{});
}

// Reads that truly leave their buffer are refused before anything runs: a reduction one past
// the end, and a gated read whose index leaves the buffer where its gate holds
TEST_P(KernelAst, OutOfBoundsReadsAreRefused) {
  auto past_end = [](const Params& p) {
    const UOp r0 = rng(4, 0), r1 = rng(4, 1);
    return ast(kernel_store(at(p[0], r0), reduce(Op::Add, at(p[1], r0 * ci(4) + r1 + ci(1)), {r1})),
               {r0});
  };
  Tensor a = custom_kernel({Tensor::empty({4}), Tensor::zeros({4, 4}).realize()}, past_end)[0];
  expect_error([&] { a.realize(); }, "PARAM 1 is accessed at indices 1..16, outside its 16");
  auto bad_gate = [](const Params& p) {
    const UOp r0 = rng(10, 0), valid = r0.lt(ci(9));  // misses r0 >= 1: index -1 at r0 = 0
    return ast(kernel_store(at(p[0], r0), padded_read(p[1], valid, r0 - ci(1))), {r0});
  };
  Tensor b = custom_kernel({Tensor::empty({10}), Tensor::zeros({8}).realize()}, bad_gate)[0];
  expect_error([&] { b.realize(); },
               "PARAM 1 is accessed at indices -1..7 where its gate holds, outside its 8");
  // a gated store is checked where its gate holds: out[r0 - 1] = in[r0] for 1 <= r0 < 9 writes
  // inside; without r0 >= 1 it would write element -1
  auto gated_store = [](bool whole_gate) {
    return [whole_gate](const Params& p) {
      const UOp r0 = rng(10, 0), valid = whole_gate ? r0.ge(ci(1)) & r0.lt(ci(9)) : r0.lt(ci(9));
      return ast(kernel_store(at(p[0], valid.where(r0 - ci(1), invalid())), at(p[1], r0)), {r0});
    };
  };
  Tensor in = tensor(ints(10, 5), {10});
  Tensor c = custom_kernel({Tensor::empty({8}), in}, gated_store(true))[0];
  const std::vector<double> hin = in.to_doubles();
  EXPECT_EQ(c.to_doubles(), D(hin.begin() + 1, hin.begin() + 9));
  Tensor d = custom_kernel({Tensor::empty({8}), in}, gated_store(false))[0];
  expect_error([&] { d.realize(); },
               "PARAM 0 is accessed at indices -1..7 where its gate holds, outside its 8");
}

// Gated accesses whose interval bounds are too wide are decided exactly: a strided window's
// index 10*r0 + 5*r2 under a gate on 2*r0 + r2 (the linear form), a gate the simplifier rewrote
// (each value of a small loop on its own), and a pool gradient's floor divisions and moduli
// (Z3). An access that does leave its buffer is still refused, with a point where it does.
TEST_P(KernelAst, GatedAccessesAreDecidedExactly) {
  // out[r0][r1] = in[2*r0 + r2 - 1][...] summed over r2, gated to the rows of in (5 rows of 5)
  auto strided = [](int64_t offset, bool rewritten) {
    return [offset, rewritten](const Params& p) {
      const UOp r0 = rng(3, 0), r1 = rng(5, 1), r2 = rng(2, 2);
      const UOp row = r0 * ci(2) + r2;
      // 1 <= 2*r0 + r2 < 6, or the simplifier's equivalent r0 + r2 >= 1 (r2 < 2)
      const UOp valid = rewritten ? (r0 + r2).ge(ci(1)) : row.ge(ci(1)) & row.lt(ci(6));
      const UOp idx = r0 * ci(10) + r2 * ci(5) + r1 - ci(offset);
      return ast(kernel_store(at(p[0], r0 * ci(5) + r1),
                              reduce(Op::Add, padded_read(p[1], valid, idx), {r2})),
                 {r0, r1});
    };
  };
  Tensor in = tensor(ints(25, 3), {25});
  const std::vector<double> hin = in.to_doubles();
  for (const bool rewritten : {false, true}) {
    Tensor out = custom_kernel({Tensor::empty({15}), in}, strided(5, rewritten))[0];
    const std::vector<double> got = out.to_doubles();
    for (int64_t r0 = 0; r0 < 3; ++r0)
      for (int64_t r1 = 0; r1 < 5; ++r1) {
        double want = 0;
        for (int64_t r2 = 0; r2 < 2; ++r2)
          if (2 * r0 + r2 >= 1 && 2 * r0 + r2 < 6)
            want += hin[static_cast<size_t>((2 * r0 + r2 - 1) * 5 + r1)];
        EXPECT_EQ(got[static_cast<size_t>(r0 * 5 + r1)], want) << r0 << "," << r1;
      }
  }
  // an offset one too large: the first row of the window reads element -1, refused with a witness
  Tensor bad = custom_kernel({Tensor::empty({15}), in}, strided(6, true))[0];
  expect_error([&] { bad.realize(); },
               "where its gate holds, outside its 25 elements (for example at index -1");
  // out[r1] += in[r1 + r2] where r1 + 2*r2 < limit: the gate bounds neither the index nor a
  // multiple of it, and the loops are too long to try one by one; Z3 decides
  auto diagonal = [](int64_t limit) {
    return [limit](const Params& p) {
      const UOp r1 = rng(100, 0), r2 = rng(100, 1);
      const UOp valid = (r1 + r2 * ci(2)).lt(ci(limit));
      return ast(
          kernel_store(at(p[0], r1), reduce(Op::Add, padded_read(p[1], valid, r1 + r2), {r2})),
          {r1});
    };
  };
  Tensor small = tensor(ints(10, 4), {10});
  const std::vector<double> hs = small.to_doubles();
  const std::vector<double> sums =
      custom_kernel({Tensor::empty({100}), small}, diagonal(10))[0].to_doubles();
  for (int64_t r1 = 0; r1 < 100; ++r1) {
    double want = 0;
    for (int64_t r2 = 0; r1 + 2 * r2 < 10; ++r2) want += hs[static_cast<size_t>(r1 + r2)];
    EXPECT_EQ(sums[static_cast<size_t>(r1)], want) << r1;
  }
  Tensor wide = custom_kernel({Tensor::empty({100}), small}, diagonal(12))[0];
  expect_error([&] { wide.realize(); }, "outside its 10 elements (for example at index 1");
}

INSTANTIATE_TEST_SUITE_P(Devices, KernelAst, ::testing::ValuesIn(test_devices()), device_test_name);

// Z3 models what the kernel computes, not ideal integers: a division by zero divides by 1 (the
// CPU records the error and runs on, so the access happens), and arithmetic that may wrap around
// is not modelled at all. Neither proves an access that can leave its buffer.
TEST(IndexProof, ZeroDivisorsAndWraparoundProveNothing) {
  const UOp r0 = rng(100, 0);
  // r0 // 0 reads like r0 // 1: up to 99, past 10 elements (a zero divisor once made the
  // solver's facts false, which "proved" anything); so does a divisor that is 0 only sometimes
  const UOp by_zero = UOp::make(Op::FloorDiv, dtypes::index, {r0, ci(0)});
  EXPECT_NE(prove_index_in_bounds(by_zero, UOp(), 10).verdict, IndexProof::InBounds);
  const UOp r1 = rng(2, 1);
  const UOp sometimes = UOp::make(Op::FloorDiv, dtypes::index, {r0, r1});
  EXPECT_NE(prove_index_in_bounds(sometimes, UOp(), 10).verdict, IndexProof::InBounds);
  // x * 2 in int32 wraps: 0 <= x*2 < 20 does not bound x (x = INT32_MIN + 5 gives 10)
  const UOp x = UOp::variable("x", std::numeric_limits<int32_t>::min(),
                              std::numeric_limits<int32_t>::max(), dtypes::int32);
  const UOp twice = x * UOp::cint(2, dtypes::int32);
  const UOp gate = twice.ge(UOp::cint(0, dtypes::int32)) & twice.lt(UOp::cint(20, dtypes::int32));
  const IndexProofResult wrap = prove_index_in_bounds(x.cast(dtypes::index), gate, 10);
  EXPECT_EQ(wrap.verdict, IndexProof::Unknown);
  EXPECT_NE(wrap.detail.find("may wrap around"), std::string::npos) << wrap.detail;
  // without the wrap (a bounded x) Z3 proves it
  const UOp y = UOp::variable("y", -1000, 1000, dtypes::int32);
  const UOp y2 = y * UOp::cint(2, dtypes::int32);
  const UOp ygate = y2.ge(UOp::cint(0, dtypes::int32)) & y2.lt(UOp::cint(20, dtypes::int32));
  EXPECT_EQ(prove_index_in_bounds(y.cast(dtypes::index), ygate, 10).verdict, IndexProof::InBounds);
}

namespace {
// The kernel bound to placeholder buffers of these sizes, lowered to its LINEAR program for CPU.
UOp program(const UOp& sink, const std::vector<int64_t>& sizes) {
  std::vector<UOp> bufs;
  for (size_t k = 0; k < sizes.size(); ++k)
    bufs.push_back(
        UOp::make(Op::Buffer, dtypes::float32, {},
                  Arg::record("ParamArg", {{"slot", Arg::integer(static_cast<int64_t>(k))},
                                           {"size", Arg::integer(sizes[k])}})));
  return linearize_kernel(bind_kernel(sink, bufs), Target::of("CPU"));
}
std::vector<Op> ops_of(const UOp& linear) {
  std::vector<Op> out;
  for (const UOp& u : linear.src()) out.push_back(u.op());
  return out;
}
int64_t count(const UOp& linear, Op op) { return std::ranges::count(ops_of(linear), op); }
Params params(const std::vector<Dims>& shapes) {
  Params p;
  for (size_t k = 0; k < shapes.size(); ++k)
    p.push_back(param_like(Tensor::empty(shapes[k]).uop(), k));
  return p;
}
}  // namespace

// One program form: a matmul lowers to three nested loops (i, j, then k inside) with one
// register accumulator set inside j, updated inside k and read after it; CPU's IR has exactly
// the program's loops and loads.
TEST(KernelAstProgram, MatmulIsThreeNestedLoopsWithAnAccumulator) {
  const Params p = params({{4, 8}, {4, 64}, {64, 8}});
  const UOp lin = program(matmul_ast(p, 4, 64, 8), {32, 256, 512});
  EXPECT_EQ(count(lin, Op::Range), 3);
  EXPECT_EQ(count(lin, Op::End), 3);
  EXPECT_EQ(count(lin, Op::Load), 4);   // A, B, the accumulator in the update and after the loop
  EXPECT_EQ(count(lin, Op::Store), 3);  // the accumulator's set and update, the output
  // loops nest: every END closes the innermost open RANGE, and the k loop is innermost
  std::vector<UOp> open;
  size_t deepest = 0;
  for (const UOp& u : lin.src()) {
    if (u.op() == Op::Range) open.push_back(u), deepest = std::max(deepest, open.size());
    if (u.op() == Op::End) {
      ASSERT_FALSE(open.empty());
      EXPECT_EQ(u.src(1), open.back());
      open.pop_back();
    }
  }
  EXPECT_EQ(deepest, 3u);
  // the register is the only BUFFER with addrspace REG, and the set happens inside two loops
  int regs = 0;
  for (const UOp& u : lin.src()) regs += u.op() == Op::Buffer && is_register(u);
  EXPECT_EQ(regs, 1);
  const std::string ir = render_llvm(lin).ir;
  size_t phis = 0;
  for (size_t at = ir.find(" = phi i32"); at != std::string::npos;
       at = ir.find(" = phi i32", at + 1))
    ++phis;
  EXPECT_EQ(phis, 3u);  // the loops count in int32 (their bounds fit it)
}

// Random reductions (row sums, maxima and products, matmuls; float32, float16, int32, int8;
// rows of one element or longer) agree on INTERP, the reference, and CPU.
TEST(KernelAstDevices, RandomReductionsAgreeOnInterpAndCpu) {
  if (!device_available("CPU")) GTEST_SKIP() << "device CPU is not available here";
  SKIP_WHERE_INTERP_RUNS_GPU_KERNELS("INTERP");
  int compared = 0;
  for (uint32_t seed = 0; seed < 48; ++seed) {
    std::mt19937 g(seed);
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(g); };
    // every dtype and op with rows of one element and longer
    const DType dt =
        std::vector<DType>{dtypes::float32, dtypes::float16, dtypes::int32, dtypes::int8}[seed % 4];
    const Op op = std::vector<Op>{Op::Add, Op::Max, Op::Mul}[(seed / 4) % 3];
    const int64_t m = 1 + pick(5), kk = 1 + pick(9), n = seed % 24 < 12 ? 1 : 2 + pick(6);
    std::vector<float> va, vb;
    for (int64_t k = 0; k < m * kk; ++k) va.push_back(static_cast<float>(pick(17) - 8) * 0.37f);
    for (int64_t k = 0; k < kk * n; ++k) vb.push_back(static_cast<float>(pick(9) - 4) * 0.61f);
    // out[i, j] = reduce_k a[i, k] * b[k, j]
    auto kernel = [&](const Params& p) {
      const UOp r0 = rng(m, 0), r1 = rng(n, 1), r2 = rng(kk, 2);
      const UOp prod = at(p[1], r0 * ci(kk) + r2) * at(p[2], r2 * ci(n) + r1);
      return ast(kernel_store(at(p[0], r0 * ci(n) + r1), reduce(op, prod, {r2})), {r0, r1});
    };
    std::vector<double> results[2];
    for (int d = 0; d < 2; ++d) {
      set_default_device(d == 0 ? "INTERP" : "CPU");
      results[d] = custom_kernel({Tensor::empty({m, n}, dt), tensor(va, {m, kk}, dt),
                                  tensor(vb, {kk, n}, dt)},
                                 kernel)[0]
                       .to_doubles();
    }
    set_default_device("");
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t k = 0; k < results[0].size(); ++k, ++compared)
      EXPECT_EQ(results[0][k], results[1][k])
          << "seed " << seed << " " << dt.repr() << " " << op_name(op) << " element " << k;
  }
  EXPECT_GT(compared, 100);
}

// ---- the kernel ASTs realize generates (tensor/realize.cpp's kernel_ast): named as tinygrad
// names them before the optimizer, run through the same entry points, compiled once per AST

namespace {
std::vector<float> iota(int64_t n) {
  std::vector<float> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(static_cast<float>(k));
  return v;
}
using Names = std::vector<std::string>;
}  // namespace

class GeneratedKernels : public OnDevice {};

// a.sum(1) over (16, 32): one output range (WEAK) of 16, one REDUCE range of 32
TEST_P(GeneratedKernels, RowSumIsNamedR_16_32) {
  SKIP_WHERE_INTERP_RUNS_GPU_KERNELS(GetParam());
  Tensor a = tensor(iota(16 * 32), {16, 32});
  Tensor s = a.sum({1});
  s.realize();
  EXPECT_EQ(last_kernel_names(), Names{"r_16_32"});
  const std::vector<float> got = s.data<float>();
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(got[static_cast<size_t>(i)], static_cast<float>(32 * (32 * i) + 31 * 32 / 2)) << i;
}

// a.T.contiguous() of (8, 16): the output's ranges in its own order, (16, 8), the last upcast by
// 4 (tinygrad's name, checked with its DEBUG=4: E_16_2_4)
TEST_P(GeneratedKernels, TransposeIsNamedE_16_2_4) {
  Tensor a = tensor(iota(8 * 16), {8, 16});
  Tensor t = a.transpose().contiguous();
  t.realize();
  EXPECT_EQ(last_kernel_names(), Names{"E_16_2_4"});
  EXPECT_EQ(t.data<float>()[1], 16.0f);
}

// no range of size 1 in a name; a full sum has only REDUCE ranges; two kernels in order; each
// named after its opts (tinygrad's names, checked with its DEBUG=4 on one thread)
TEST_P(GeneratedKernels, NamesOfSeveralKernels) {
  SKIP_WHERE_INTERP_RUNS_GPU_KERNELS(GetParam());
  Tensor a = tensor(iota(16 * 16), {16, 16});
  Tensor full = a.sum();
  full.realize();
  EXPECT_EQ(last_kernel_names(), Names{"r_64_4"});  // the 256 merged, unrolled by 4
  EXPECT_EQ(full.data<float>()[0], 255.0f * 256.0f / 2.0f);
  Tensor b = tensor(iota(16), {16, 1});
  Tensor e = (a + b.expand({16, 16})) * a;
  e.realize();
  EXPECT_EQ(last_kernel_names(), Names{"E_16_4_4"});
  Tensor c = tensor(iota(16), {4, 4});
  Tensor d = c - c.sum({1}, true);
  d.realize();
  EXPECT_EQ(last_kernel_names(), (Names{"r_4_4", "E_4_4"}));
  EXPECT_EQ(d.data<float>()[5], 5.0f - (4 + 5 + 6 + 7));
}

// The kernel AST of a - a.sum(1, keepdim) (4, 4), as tinygrad's: the row sum's kernel
//   SINK(END(STORE(INDEX(PARAM 0 (4), r0), REDUCE[(ADD, 0)](INDEX(PARAM 1 (16), ...), r1)), r0))
// with r0 WEAK, r1 REDUCE; the subtraction's END(STORE(INDEX(PARAM 0 (16), flat),
// INDEX(PARAM 1, ...) - INDEX(PARAM 2, ...)), r0, r1) with both ranges WEAK, ids from 0.
TEST_P(GeneratedKernels, KernelAstForm) {
  Tensor c = tensor(iota(16), {4, 4});
  Tensor d = c - c.sum({1}, true);
  d.realize();
  const std::vector<UOp>& asts = last_kernel_asts();
  ASSERT_EQ(asts.size(), 2u);
  auto ranges = [](const UOp& end) {
    std::vector<std::string> out;
    for (size_t k = 1; k < end.nsrc(); ++k)
      out.push_back(range_label(end.src(k)) + "/" +
                    std::string(axis_type_name(axis_type_of(end.src(k)))));
    return out;
  };
  // PARAM slots and element counts in first-use order
  auto params = [](const UOp& sink) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const UOp& u : toposort(sink))
      if (u.op() == Op::Param)
        out.emplace_back(static_cast<int64_t>(u.arg().field("slot").as_int()),
                         static_cast<int64_t>(u.src(0).src(0).arg().as_int()));
    return out;
  };
  for (const UOp& sink : asts) {
    EXPECT_EQ(sink.op(), Op::Sink);
    ASSERT_EQ(sink.nsrc(), 1u);
    EXPECT_EQ(sink.src(0).op(), Op::End);
    const UOp& st = sink.src(0).src(0);
    ASSERT_EQ(st.op(), Op::Store);
    EXPECT_EQ(st.src(0).op(), Op::Index);
    EXPECT_EQ(st.src(0).src(0).op(), Op::Param);
    EXPECT_EQ(st.src(0).src(0).arg().field("slot").as_int(), 0);
  }
  EXPECT_EQ(KernelInfo::of(asts[0]).name, "r_4_4");
  EXPECT_EQ(ranges(asts[0].src(0)), std::vector<std::string>{"L0/WEAK"});
  const UOp& red = asts[0].src(0).src(0).src(1);
  ASSERT_EQ(red.op(), Op::Reduce);
  EXPECT_EQ(red.arg(), Arg::tuple({Arg::op(Op::Add), Arg::integer(0)}));
  ASSERT_EQ(red.nsrc(), 2u);
  EXPECT_EQ(range_label(red.src(1)), "R1");  // REDUCE, id 1 after the output's 0
  EXPECT_EQ(params(asts[0]), (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {1, 16}}));
  EXPECT_EQ(KernelInfo::of(asts[1]).name, "E_4_4");
  EXPECT_EQ(ranges(asts[1].src(0)), (std::vector<std::string>{"L0/WEAK", "L1/WEAK"}));
  EXPECT_EQ(params(asts[1]), (std::vector<std::pair<int64_t, int64_t>>{{0, 16}, {1, 16}, {2, 4}}));
  // the output's row-major position, as tinygrad writes it: r0*4 + r1
  const UOp& end = asts[1].src(0);
  EXPECT_EQ(end.src(0).src(0).src(1), end.src(1) * ci(4) + end.src(2));
  // range ids are 0..n-1 in every kernel, also where the lowering folded a range of size 1 away
  Tensor e = tensor(iota(8), {4, 1, 2});
  for (Tensor t : {e.sum({1}), e.sum({1, 2}), e.max({0, 1}), e.sum({1}, true) + e}) {
    t.realize();
    for (const UOp& sink : last_kernel_asts()) {
      std::set<i128> ids;
      for (const UOp& u : toposort(sink))
        if (u.op() == Op::Range) ids.insert(u.arg().items()[0].as_int());
      std::set<i128> want;
      for (i128 k = 0; k < static_cast<i128>(ids.size()); ++k) want.insert(k);
      EXPECT_EQ(ids, want) << KernelInfo::of(sink).name;
    }
  }
}

// A pad's reads are gated (where(valid, i, Invalid)): under SPEC=1 spec_kernel_ast accepts the
// kernel, and the binder's bounds check holds where the gate does.
TEST_P(GeneratedKernels, PaddedReadsAreGated) {
  SKIP_WHERE_INTERP_RUNS_GPU_KERNELS(GetParam());
  Tensor a = tensor(iota(8), {8});
  Tensor p = a.pad({{1, 1}}) + 1.0f;
  p.realize();
  EXPECT_EQ(last_kernel_names(), Names{"E_10"});
  EXPECT_EQ(p.data<float>(), (std::vector<float>{1, 1, 2, 3, 4, 5, 6, 7, 8, 1}));
  Tensor c = Tensor::cat({a, tensor(iota(8), {8}) * 2.0f});
  c.realize();
  const std::vector<float> got = c.data<float>();
  EXPECT_EQ(got[3], 3.0f);
  EXPECT_EQ(got[11], 6.0f);
  // a padded 2-D window sum (a convolution's reads): gates over two axes, under a REDUCE
  Tensor m = tensor(iota(16), {4, 4});
  Tensor w = m.pad({{1, 1}, {1, 1}}).sum({0});
  EXPECT_EQ(w.data<float>(), (std::vector<float>{0, 24, 28, 32, 36, 0}));
  // a pad of a pad: the read gated by both WHEREs' conditions
  Tensor q = tensor(iota(3), {3}).pad({{1, 1}}).pad({{2, 0}}) * 2.0f;
  EXPECT_EQ(q.data<float>(), (std::vector<float>{0, 0, 0, 0, 2, 4, 0}));
}

// Equal kernel ASTs over other buffers of the same sizes compile once (the PARAMs stand for the
// buffers); another shape compiles again.
TEST_P(GeneratedKernels, EqualKernelsCompileOnce) {
  Tensor a = tensor(iota(105), {5, 7, 3}), b = tensor(iota(105), {5, 7, 3});
  Tensor c = tensor(iota(105), {5, 7, 3}), d = tensor(iota(105), {5, 7, 3});
  Tensor x = a + b;
  x.realize();
  EXPECT_EQ(last_compile_count(), 1);
  Tensor y = c + d * 1.0f;  // folds to c + d: the same kernel
  y.realize();
  EXPECT_EQ(last_kernel_count(), 1);
  EXPECT_EQ(last_compile_count(), 0);
  EXPECT_EQ(y.data<float>()[104], 208.0f);
  Tensor z = tensor(iota(104), {8, 13}) + tensor(iota(104), {8, 13});
  z.realize();
  EXPECT_EQ(last_compile_count(), 1);
  // two equal kernels of one realize: one compile, one AST
  Tensor s1 = tensor(iota(33), {3, 11}).max({1}), s2 = tensor(iota(33), {3, 11}).max({1});
  Tensor::realize_all({&s1, &s2});
  EXPECT_EQ(last_kernel_count(), 2);
  EXPECT_EQ(last_compile_count(), 1);
  ASSERT_EQ(last_kernel_asts().size(), 2u);
  EXPECT_EQ(last_kernel_asts()[0], last_kernel_asts()[1]);
  EXPECT_EQ(s2.data<float>(), (std::vector<float>{10, 21, 32}));
}

INSTANTIATE_TEST_SUITE_P(Devices, GeneratedKernels, ::testing::ValuesIn(test_devices()),
                         device_test_name);

// kernel_name: r (a REDUCE) or E, then every range longer than 1 by axis position and id; a
// symbolic bound is named by its expression.
TEST(KernelName, SizesInAxisOrderAndSymbolicBounds) {
  const UOp out = UOp::cint(0);
  const UOp r1 = UOp::range(UOp::cint(8), 1), r0 = UOp::range(UOp::cint(4), 0);
  const UOp red = UOp::range(UOp::cint(32), 2, AxisType::Reduce);
  const UOp one = UOp::range(UOp::cint(1), 3);
  const UOp v = reduce(Op::Add, UOp::cint(1) + red + one, {red});
  EXPECT_EQ(kernel_name(UOp::sink(std::vector<UOp>{r1 + r0 + v})), "r_4_8_32");
  EXPECT_EQ(kernel_name(UOp::sink(std::vector<UOp>{r1 + r0 + one})), "E_4_8");
  const UOp n = UOp::variable("n", 1, 64);
  EXPECT_EQ(kernel_name(UOp::sink(std::vector<UOp>{UOp::range(n, 0) + out})), "E_n");
}

// ---- opts by hand (codegen/opt.h): UPCAST and UNROLL split a range; the expander makes its part
// vector lanes, the devectorizer one scalar op per lane

namespace {
UOp red_rng(int64_t n, int axis) { return UOp::range(UOp::cint(n), axis, AxisType::Reduce); }
// c[i, j] = sum_k a[i, k] * b[k, j], the reduction over a REDUCE range (the kind UNROLL splits)
UOp matmul_reduce_ast(const Params& p, int64_t m, int64_t kk, int64_t n) {
  const UOp r0 = rng(m, 0), r1 = rng(n, 1), r2 = red_rng(kk, 2);
  const UOp prod = at(p[1], r0 * ci(kk) + r2) * at(p[2], r2 * ci(n) + r1);
  return ast(kernel_store(at(p[0], r0 * ci(n) + r1), reduce(Op::Add, prod, {r2})), {r0, r1});
}
std::vector<Opt> opts(std::initializer_list<Opt> o) { return o; }
Opt upcast(int axis, int64_t n) { return {OptOp::Upcast, axis, n}; }
Opt unroll(int axis, int64_t n) { return {OptOp::Unroll, axis, n}; }
}  // namespace

// The ranges opts address, in tinygrad's order (output loops, then reductions); an opt records
// itself in the KernelInfo and renames the kernel; a bad opt is refused naming it.
TEST(Opts, ApplyOptsSplitsARangeAndRefusesBadOnes) {
  const Params p = params({{4, 8}, {4, 64}, {64, 8}});
  const UOp k = matmul_reduce_ast(p, 4, 64, 8);
  std::vector<std::string> labels;
  for (const UOp& r : opt_ranges(k)) labels.push_back(range_label(r));
  EXPECT_EQ(labels, (std::vector<std::string>{"L0", "L1", "R2"}));
  const UOp o = apply_opts(k, opts({upcast(1, 4), unroll(0, 2)}), Target::of("CPU"));
  labels.clear();
  for (const UOp& r : opt_ranges(o)) labels.push_back(range_label(r));
  EXPECT_EQ(labels, (std::vector<std::string>{"L0", "L1", "u3", "R2", "r4"}));
  const KernelInfo info = KernelInfo::of(o);
  ASSERT_EQ(info.applied_opts.size(), 2u);
  EXPECT_EQ(opt_from_arg(info.applied_opts[0]), upcast(1, 4));
  EXPECT_EQ(opt_from_arg(info.applied_opts[1]), unroll(0, 2));
  expect_error<KernelOptError>([&] { apply_opts(k, opts({upcast(3, 2)}), Target::of("CPU")); },
                               "UPCAST(3, 2): the kernel has 3 opt axes");
  expect_error<KernelOptError>([&] { apply_opts(k, opts({upcast(0, 3)}), Target::of("CPU")); },
                               "UPCAST(0, 3): 3 does not divide the range's size 4");
  expect_error<KernelOptError>([&] { apply_opts(k, opts({upcast(2, 4)}), Target::of("CPU")); },
                               "upcast is for output axes, not REDUCE");
  expect_error<KernelOptError>([&] { apply_opts(k, opts({upcast(2, 32)}), Target::of("CPU")); },
                               "32");
  expect_error<KernelOptError>([&] { apply_opts(k, opts({unroll(0, 64)}), Target::of("CPU")); },
                               "UNROLL(0, 64): 64 lanes, more than 32");
  expect_error<KernelOptError>([&] { apply_opts(k, opts({unroll(1, 2)}), Target::of("CPU")); },
                               "UNROLL(1, 2): the kernel has 1 reduce axes");
}

namespace {
std::vector<std::string> range_labels(const UOp& k) {
  std::vector<std::string> labels;
  for (const UOp& r : opt_ranges(k)) labels.push_back(range_label(r));
  return labels;
}
// row sums of a (rows, cols) PARAM 1 into PARAM 0
UOp row_sum_ast(const Params& p, int64_t rows, int64_t cols) {
  const UOp r0 = rng(rows, 0), r1 = red_rng(cols, 1);
  return ast(kernel_store(at(p[0], r0), reduce(Op::Add, at(p[1], r0 * ci(cols) + r1), {r1})), {r0});
}
}  // namespace

// Every kind of opt is refused where tinygrad's Scheduler refuses it, naming the opt and why.
TEST(Opts, EveryKindOfOptIsCheckedAsTinygrad) {
  const ScopedEnv two_threads("CPU_THREADS", "2");
  const Target &cpu = Target::of("CPU"), &cuda = Target::of("CUDA");
  const UOp k = matmul_reduce_ast(params({{4, 34}, {4, 66}, {66, 34}}), 4, 66, 34);
  auto refused = [&](const std::vector<Opt>& o, const Target& t, const std::string& why) {
    expect_error<KernelOptError>([&] { apply_opts(k, o, t); }, why);
  };
  refused({upcast(1, 17)}, cpu, "UPCAST(1, 17): 17 lanes, more than 16");
  refused({upcast(0, 3)}, cpu, "UPCAST(0, 3): 3 does not divide the range's size 4");
  refused({unroll(0, 33)}, cpu, "UNROLL(0, 33): 33 lanes, more than 32");
  refused({unroll(0, 2), unroll(1, 2)}, cpu, "UNROLL(1, 2): the kernel has 1 reduce axes");
  refused({{OptOp::Local, 0, 2}}, cpu, "LOCAL(0, 2): CPU has no local memory or workgroups");
  refused({{OptOp::GroupTop, 0, 2}}, cpu, "GROUPTOP(0, 2): CPU has no local memory");
  refused({{OptOp::Thread, 0, 2}}, cuda, "THREAD(0, 2): CUDA runs no threads");
  refused({{OptOp::Thread, 0, 4}}, cpu, "THREAD(0, 4): 4 threads, more than the 2");
  refused({{OptOp::Thread, 0, 2}, {OptOp::Thread, 0, 2}}, cpu, "the kernel is threaded already");
  refused({{OptOp::Thread, 2, 2}}, cpu,
          "THREAD(2, 2): threads split only an output range every output loops over");
  refused({{OptOp::Padto, 0, 32}}, cpu, "PADTO(0, 32): the pad more than quadruples the work");
  refused({upcast(1, 2), {OptOp::Padto, 2, 4}}, cpu, "an upcast range does not pad");
  refused({{OptOp::Thread, 0, 2}, {OptOp::Padto, 2, 4}}, cpu, "a thread range does not pad");
  refused({{OptOp::Swap, 0, 1}}, cpu, "SWAP(0, 1): swap is for GLOBAL ranges");
  refused({{OptOp::Nolocals}, {OptOp::Local, 0, 2}}, cuda, "the kernel uses no locals (NOLOCALS)");
  refused({{OptOp::Local, 0, 2}, {OptOp::Nolocals}}, cuda, "NOLOCALS: the kernel has locals");
  refused({{OptOp::Group, 1, 2}}, cuda, "GROUP(1, 2): the kernel has 1 REDUCE axes");
  // a group's partial sums live in shared memory: 16384 floats are 64 KiB, CUDA has 48
  const UOp big = row_sum_ast(params({{2}, {2, 32768}}), 2, 32768);
  expect_error<KernelOptError>(
      [&] {
        apply_opt(big, {OptOp::Group, 0, 16384}, cuda);
      },
      "needs 65536 bytes of shared memory, CUDA has 49152");
  expect_error<KernelOptError>(
      [] {
        opt_from_arg(Arg::tuple({Arg::string("TC"), Arg::integer(0), Arg::integer(0)}));
      },
      "an opt is (name, axis, arg)");
  // every kind round-trips through the KernelInfo
  for (const Opt& o : opts({upcast(0, 2),
                            unroll(1, 4),
                            {OptOp::Local, 1, 2},
                            {OptOp::Group, 0, 2},
                            {OptOp::GroupTop, 0, 2},
                            {OptOp::Thread, 0, 2},
                            {OptOp::Padto, 0, 8},
                            {OptOp::Swap, 0, 1},
                            {OptOp::Nolocals}}))
    EXPECT_EQ(opt_from_arg(opt_to_arg(o)), o) << opt_repr(o);
}

// The opts that reshape a kernel for workgroups (checked on the CUDA target; lowering them is the
// GPU devices' work): output loops become GLOBAL, LOCAL splits one, GROUPTOP splits a reduction
// with the group outermost, SWAP trades two GLOBAL ranges' ids, THREAD splits the first output
// range with the threads outermost; PADTO rounds a range up.
TEST(Opts, OptsReshapeTheKernelsRanges) {
  const ScopedEnv two_threads("CPU_THREADS", "2");
  const Target &cpu = Target::of("CPU"), &cuda = Target::of("CUDA");
  const UOp k = matmul_reduce_ast(params({{4, 8}, {4, 64}, {64, 8}}), 4, 64, 8);
  const UOp g = convert_loop_to_global(k, cuda);
  EXPECT_EQ(range_labels(g), (std::vector<std::string>{"g0", "g1", "R2"}));
  EXPECT_EQ(convert_loop_to_global(k, cpu), k);
  EXPECT_EQ(range_labels(apply_opts(g, opts({{OptOp::Local, 1, 4}}), cuda)),
            (std::vector<std::string>{"g0", "g1", "l3", "R2"}));
  const UOp grouped = apply_opts(g, opts({{OptOp::GroupTop, 0, 16}}), cuda);
  EXPECT_EQ(range_labels(grouped), (std::vector<std::string>{"g0", "g1", "G3", "R2"}));
  EXPECT_EQ(KernelInfo::of(grouped).name, "r_4_8_16_4");
  EXPECT_EQ(range_labels(apply_opts(g, opts({{OptOp::Swap, 0, 1}}), cuda)),
            (std::vector<std::string>{"g0", "g1", "R2"}));
  const UOp swapped = apply_opts(g, opts({{OptOp::Swap, 0, 1}}), cuda);
  EXPECT_EQ(KernelInfo::of(swapped).name, "r_8_4_64") << "sizes follow the swapped ids";
  // two GLOBAL ranges of one size trade ids too
  const UOp square =
      convert_loop_to_global(matmul_reduce_ast(params({{8, 8}, {8, 64}, {64, 8}}), 8, 64, 8), cuda);
  const UOp traded = apply_opts(square, opts({{OptOp::Swap, 0, 1}}), cuda);
  EXPECT_NE(traded, square);
  EXPECT_EQ(range_labels(traded), (std::vector<std::string>{"g0", "g1", "R2"}));
  EXPECT_EQ(apply_opts(traded, opts({{OptOp::Swap, 0, 1}}), cuda).src(0), square.src(0))
      << "swapping back gives the kernel again";
  const UOp threaded = apply_opts(k, opts({{OptOp::Thread, 0, 2}}), cpu);
  EXPECT_EQ(range_labels(threaded), (std::vector<std::string>{"L0", "L1", "t3", "R2"}));
  EXPECT_EQ(KernelInfo::of(threaded).name, "r_2_8_2_64");
  const UOp padded = apply_opts(k, opts({{OptOp::Padto, 1, 5}}), cpu);
  EXPECT_EQ(KernelInfo::of(padded).name, "r_4_10_64");
  EXPECT_TRUE(KernelInfo::of(apply_opts(g, opts({{OptOp::Nolocals}}), cuda)).dont_use_locals);
}

// The heuristics on a target with workgroups, as tinygrad's: a matrix-vector product groups 8
// threads a row, 4 rows a workgroup and 4 a thread; a reduction with few outputs groups by 16 and
// takes nothing more; a matmul upcasts, unrolls and takes workgroups over its output axes.
TEST(Opts, HandCodedOptsForWorkgroups) {
  const Target& cuda = Target::of("CUDA");
  auto hand_coded = [&](const UOp& k) {
    return hand_coded_opts(convert_loop_to_global(simplify_ranges(k), cuda), cuda);
  };
  const Params mv = params({{512}, {512}, {512, 512}});
  const UOp r1 = rng(512, 1), r2 = red_rng(512, 2);
  const UOp matvec =
      ast(kernel_store(at(mv[0], r1),
                       reduce(Op::Add, at(mv[1], r2) * at(mv[2], r2 * ci(512) + r1), {r2})),
          {r1});
  EXPECT_EQ(hand_coded(matvec), opts({{OptOp::Group, 0, 8}, {OptOp::Local, 0, 4}, upcast(0, 4)}));
  EXPECT_EQ(hand_coded(row_sum_ast(params({{4}, {4, 4096}}), 4, 4096)),
            opts({{OptOp::GroupTop, 0, 16}}));
  const std::vector<Opt> mm =
      hand_coded(matmul_reduce_ast(params({{64, 64}, {64, 64}, {64, 64}}), 64, 64, 64));
  EXPECT_EQ(std::ranges::count_if(mm, [](const Opt& o) { return o.op == OptOp::Local; }), 2);
  EXPECT_EQ(std::ranges::count_if(mm, [](const Opt& o) { return o.op == OptOp::Thread; }), 0);
}

// THREAD: tinygrad's heuristics split a kernel of enough work over the threads the CPU runs (the
// largest of 32, 16, 12, 8, 6, 5, 4, 3, 2 that leaves each 128Ki operations); the threaded kernel
// runs once per thread (each its own core_id) and computes what the one-thread kernel does.
TEST(Opts, ThreadsSplitKernelsAsTinygrad) {
  if (!device_available("CPU")) GTEST_SKIP() << "no CPU device (LLVM JIT) in this build";
  set_default_device("CPU");
  const Tensor a = Tensor::rand({512, 512}).realize(), b = Tensor::rand({512, 512}).realize();
  std::vector<double> one;
  for (const char* threads : {"1", "2", "8"}) {
    const ScopedEnv env("CPU_THREADS", threads);
    const std::vector<double> got = a.matmul(b).to_doubles();
    const std::string name = last_kernel_names().back();  // after its operands' packing copies
    if (one.empty()) one = got;
    EXPECT_EQ(got, one) << threads << " threads";
    EXPECT_EQ(name, std::string(threads) == "1"   ? "r_128_128_4_4_128_4"
                    : std::string(threads) == "2" ? "r_64_128_2_4_4_128_4"
                                                  : "r_16_128_8_4_4_128_4");
    // a kernel of little work is not threaded
    (a.shrink({{0, 1}, {0, 7}}) + 1).realize();
    EXPECT_EQ(last_kernel_names().at(0), "E_7");
  }
  set_default_device("");
}

// tinygrad's 64x64 matmul with UPCAST(1, 4), UPCAST(0, 2), UNROLL(0, 2): one accumulator of the
// 8 outputs' 2 unrolled lanes each (tinygrad: 8, folded in each step; the CPU and the INTERP that
// mirrors it keep them, rules/reduce.rw), and the values of the plain kernel
TEST_P(KernelAst, MatmulWithUpcastsAndUnroll) {
  const std::vector<float> a = ints(64 * 64, 21), b = ints(64 * 64, 22);
  D want(64 * 64, 0);
  for (int64_t i = 0; i < 64; ++i)
    for (int64_t j = 0; j < 64; ++j)
      for (int64_t k = 0; k < 64; ++k) want[i * 64 + j] += a[i * 64 + k] * b[k * 64 + j];
  const std::vector<Opt> o = {upcast(1, 4), upcast(0, 2), unroll(0, 2)};
  auto kernel = [&](const Params& p) { return with_opts(matmul_reduce_ast(p, 64, 64, 64), o); };
  Tensor c =
      custom_kernel({Tensor::empty({64, 64}), tensor(a, {64, 64}), tensor(b, {64, 64})}, kernel)[0];
  EXPECT_EQ(c.to_doubles(), want);
  const Params p = params({{64, 64}, {64, 64}, {64, 64}});
  const UOp lin = program(with_opts(matmul_reduce_ast(p, 64, 64, 64), o), {4096, 4096, 4096});
  std::vector<int64_t> regs;
  for (const UOp& u : lin.src())
    if (u.op() == Op::Buffer && is_register(u))
      regs.push_back(static_cast<int64_t>(u.arg().field("size").as_int()));
  EXPECT_EQ(regs, std::vector<int64_t>{16});
  EXPECT_EQ(count(lin, Op::Range), 3);  // 32 x 16 output loops and 32 reduce steps
}

namespace {
// Kernels for the opts sweep: each builds its AST over the PARAMs of `inputs` (the output first).
struct SweepKernel {
  std::string name;
  std::vector<Tensor> inputs;
  std::function<UOp(const Params&)> ast;
};
std::vector<SweepKernel> sweep_kernels() {
  const Tensor a = tensor(ints(2 * 8, 31), {2, 8}), b = tensor(ints(2 * 8, 32), {2, 8});
  const Tensor m = tensor(ints(4 * 16, 33), {4, 16}), n = tensor(ints(16 * 8, 34), {16, 8});
  const Tensor col = tensor(ints(4, 35), {4}), row = tensor(ints(8, 36), {8});
  std::vector<float> below_zero = ints(4 * 16, 37), not_zero = ints(4 * 16, 38);
  for (float& x : below_zero) x = -std::abs(x) - 1;
  for (float& x : not_zero) x = x < 0 ? -1 : 1 + static_cast<float>(x > 1);
  const Tensor negative = tensor(below_zero, {4, 16}), nonzero = tensor(not_zero, {4, 16});
  auto row_reduce = [](Op op, int64_t rows, int64_t cols) {
    return [=](const Params& p) {
      const UOp r0 = rng(rows, 0), r1 = red_rng(cols, 1);
      return ast(kernel_store(at(p[0], r0), reduce(op, at(p[1], r0 * ci(cols) + r1), {r1})), {r0});
    };
  };
  return {
      {"add (2, 8)",
       {Tensor::empty({2, 8}), a, b},
       [](const Params& p) {
         const UOp r0 = rng(2, 0), r1 = rng(8, 1), i = r0 * ci(8) + r1;
         return ast(kernel_store(at(p[0], i), at(p[1], i) + at(p[2], i)), {r0, r1});
       }},
      {"outer sum (4, 8)",
       {Tensor::empty({4, 8}), col, row},
       [](const Params& p) {
         const UOp r0 = rng(4, 0), r1 = rng(8, 1);
         return ast(kernel_store(at(p[0], r0 * ci(8) + r1), at(p[1], r0) * at(p[2], r1)), {r0, r1});
       }},
      {"row sum (4, 16)", {Tensor::empty({4}), m}, row_reduce(Op::Add, 4, 16)},
      {"row max (4, 16)", {Tensor::empty({4}), m}, row_reduce(Op::Max, 4, 16)},
      // (a padded reduce range reduces its identity: a max of negatives, a product without 0)
      {"row max of negatives (4, 16)", {Tensor::empty({4}), negative}, row_reduce(Op::Max, 4, 16)},
      {"int row max of negatives (4, 16)",
       {Tensor::empty({4}, dtypes::int32), negative.cast(dtypes::int32).realize()},
       row_reduce(Op::Max, 4, 16)},
      {"row product without 0 (4, 16)",
       {Tensor::empty({4}, dtypes::int32), nonzero.cast(dtypes::int32).realize()},
       row_reduce(Op::Mul, 4, 16)},
      {"row product (4, 16)",
       {Tensor::empty({4}), m.cast(dtypes::int32).realize()},
       row_reduce(Op::Mul, 4, 16)},
      {"half row sum (4, 16)",
       {Tensor::empty({4}, dtypes::float16), m.cast(dtypes::float16)},
       row_reduce(Op::Add, 4, 16)},
      {"matmul (4, 16) @ (16, 8)",
       {Tensor::empty({4, 8}), m, n},
       [](const Params& p) { return matmul_reduce_ast(p, 4, 16, 8); }},
      {"arange 16",
       {Tensor::empty({16}, dtypes::int32)},
       [](const Params& p) {
         const UOp r0 = rng(16, 0);
         return ast(kernel_store(at(p[0], r0), r0.cast(dtypes::int32)), {r0});
       }},
      {"padded read 8 of 4",
       {Tensor::empty({8}), col},
       [](const Params& p) {
         const UOp r0 = rng(8, 0);
         return ast(kernel_store(at(p[0], r0), padded_read(p[1], r0.lt(ci(4)), r0)), {r0});
       }},
  };
}
// The opt lists to sweep on a kernel for `target`: none, each valid opt of `firsts` alone and
// followed by each valid one of `seconds`, each valid one of `singles` alone, and a seeded sample
// of up to `triples` valid lists of three opts drawn from all of them.
std::vector<std::vector<Opt>> sweep_lists(const UOp& kernel, const Target& target,
                                          const std::vector<Opt>& firsts,
                                          const std::vector<Opt>& seconds,
                                          const std::vector<Opt>& singles, uint32_t seed,
                                          int triples) {
  auto valid = [&](const std::vector<Opt>& o) {
    try {
      apply_opts(kernel, o, target);
      return true;
    } catch (const KernelOptError&) {
      return false;
    }
  };
  std::vector<std::vector<Opt>> out{{}};
  for (const Opt& x : firsts) {
    if (!valid({x})) continue;
    out.push_back({x});
    for (const Opt& y : seconds)
      if (valid({x, y})) out.push_back({x, y});
  }
  for (const Opt& x : singles)
    if (valid({x})) out.push_back({x});
  std::vector<Opt> every;
  for (const std::vector<Opt>* kind : {&firsts, &seconds, &singles})
    for (const Opt& o : *kind)
      if (std::ranges::find(every, o) == every.end()) every.push_back(o);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<size_t> pick(0, every.size() - 1);
  for (int tries = 0, kept = 0; tries < 200 && kept < triples; ++tries) {
    const std::vector<Opt> o = {every[pick(gen)], every[pick(gen)], every[pick(gen)]};
    if (valid(o)) {
      out.push_back(o);
      ++kept;
    }
  }
  return out;
}
// The CPU's: each valid upcast or unroll, each valid pair of them, each valid thread split or pad,
// and up to 12 valid triples of any of those kinds.
std::vector<std::vector<Opt>> opt_lists(const UOp& kernel) {
  std::vector<Opt> lanes, others;
  for (int axis = 0; axis < 3; ++axis)
    for (int64_t n : {0, 2, 4, 8}) lanes.push_back(upcast(axis, n));
  for (int64_t n : {0, 2, 4, 8}) lanes.push_back(unroll(0, n));
  for (int axis = 0; axis < 3; ++axis) {
    for (int64_t n : {2, 4}) others.push_back({OptOp::Thread, axis, n});
    for (int64_t n : {3, 5}) others.push_back({OptOp::Padto, axis, n});
  }
  return sweep_lists(kernel, Target::of("CPU"), lanes, lanes, others, 15, 12);
}
}  // namespace

// Every valid opt list of the sweep on each kernel computes what the kernel without opts
// computes, on INTERP (the reference) and on CPU (threaded kernels on 4 threads).
TEST(Opts, EveryOptListGivesTheValuesOfNoOpts) {
  SKIP_WHERE_INTERP_RUNS_GPU_KERNELS("INTERP");  // (GpuShaped.* sweeps the workgroup opts)
  const ScopedEnv threads("CPU_THREADS", "4");
  int compared = 0, threaded = 0, padded = 0;
  for (const SweepKernel& k : sweep_kernels()) {
    Params shapes;
    for (size_t i = 0; i < k.inputs.size(); ++i) shapes.push_back(param_like(k.inputs[i].uop(), i));
    const UOp plain = simplify_ranges(k.ast(shapes));  // the kernel the opts apply to
    std::vector<double> want;
    for (const std::vector<Opt>& o : opt_lists(plain)) {
      std::string what = k.name;
      for (const Opt& x : o) what += " " + opt_repr(x);
      threaded += std::ranges::any_of(o, [](const Opt& x) { return x.op == OptOp::Thread; });
      padded += std::ranges::any_of(o, [](const Opt& x) { return x.op == OptOp::Padto; });
      SCOPED_TRACE(what);
      for (const char* dev : {"INTERP", "CPU"}) {
        if (!device_available(dev)) continue;
        set_default_device(dev);
        // a fresh output each run (the kernel writes its first argument in place), the inputs
        // copied to the device
        std::vector<Tensor> args = k.inputs;
        for (Tensor& a : args) a = a.to(dev);
        args[0] = Tensor::empty(args[0].shape(), args[0].dtype());
        const std::vector<double> got =
            custom_kernel(args, [&](const Params& p) { return with_opts(k.ast(p), o); })[0]
                .to_doubles();
        set_default_device("");
        if (want.empty()) want = got;
        EXPECT_EQ(got, want) << dev;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(threaded, 10);
  EXPECT_GT(padded, 10);
}

// ---- GPU-shaped kernels (rules/gpudims.rw, rules/reduce.rw's grouped reductions), run by INTERP
// in lockstep with INTERP_TARGET=CUDA or HIP

namespace {
// A kernel's values on INTERP as the CPU shapes it (the reference) or as a GPU target does.
std::vector<double> run_on_interp(const SweepKernel& k, const std::vector<Opt>& o) {
  set_default_device("INTERP");
  std::vector<Tensor> args = k.inputs;
  for (Tensor& a : args) a = a.to("INTERP");
  args[0] = Tensor::empty(args[0].shape(), args[0].dtype());
  const std::vector<double> got =
      custom_kernel(args, [&](const Params& p) { return with_opts(k.ast(p), o); })[0].to_doubles();
  set_default_device("");
  return got;
}
// The opt lists a workgroup target takes on a kernel: each valid LOCAL, GROUP or GROUPTOP alone and
// followed by each valid upcast or unroll, each of those alone, and up to 8 valid triples.
std::vector<std::vector<Opt>> workgroup_opt_lists(const UOp& kernel, const Target& target) {
  std::vector<Opt> groups, lanes;
  for (int axis = 0; axis < 3; ++axis)
    for (int64_t n : {2, 4, 8}) groups.push_back({OptOp::Local, axis, n});
  for (int64_t n : {2, 4, 16}) {
    groups.push_back({OptOp::Group, 0, n});
    groups.push_back({OptOp::GroupTop, 0, n});
  }
  for (int axis = 0; axis < 3; ++axis) lanes.push_back(upcast(axis, 2));
  lanes.push_back(unroll(0, 2));
  return sweep_lists(convert_loop_to_global(kernel, target), target, groups, lanes, lanes, 16, 8);
}
// A kernel AST bound to buffers of its PARAMs' sizes and lowered for `target` with its
// hand-coded opts.
UOp gpu_program(const UOp& kernel, const Target& target) {
  return linearize_kernel(bind_kernel(kernel, param_buffers(kernel)), target, {},
                          /*default_opts_if_none=*/true);
}
// The bounds of a program's SPECIALs named with `prefix` ("gidx", "lidx"), by dimension.
std::vector<int64_t> launch_dims(const UOp& program, const std::string& prefix) {
  std::vector<int64_t> dims;
  for (const UOp& u : program.src())
    if (u.op() == Op::Special && u.arg().as_string().starts_with(prefix)) {
      const size_t d = static_cast<size_t>(u.arg().as_string().back() - '0');
      if (dims.size() <= d) dims.resize(d + 1, 0);
      dims[d] = static_cast<int64_t>(u.src(0).arg().as_int());
    }
  return dims;
}
// INTERP runs a lowered program over fresh buffers of its PARAMs' sizes, the inputs' values set:
// the output's values.
std::vector<double> interp_values(const UOp& kernel, const UOp& program,
                                  const std::vector<std::vector<float>>& inputs) {
  std::map<int64_t, std::shared_ptr<Storage>> bufs;
  const std::vector<UOp> params = param_buffers(kernel);
  for (size_t k = 0; k < params.size(); ++k) {
    const auto n = static_cast<int64_t>(params[k].arg().field("size").as_int());
    auto s = allocate_storage(dtypes::float32, n);
    if (k > 0) std::memcpy(s->bytes.data(), inputs[k - 1].data(), static_cast<size_t>(n) * 4);
    bufs.emplace(static_cast<int64_t>(k), s);
  }
  interp_run(program, bufs);
  const float* out = reinterpret_cast<const float*>(bufs.at(0)->bytes.data());
  return D(out, out + bufs.at(0)->size);
}
}  // namespace

// Every valid workgroup opt list (LOCAL, GROUP, GROUPTOP, with upcasts and unrolls) of the sweep's
// kernels computes, on INTERP with CUDA's and HIP's kernels, what INTERP computes with the CPU's
// kernels and no opts: workgroups, shared memory, barriers and the stores of a group's first
// thread keep every value.
TEST(GpuShaped, EveryWorkgroupOptListGivesTheValuesOfNoOpts) {
  int compared = 0, grouped = 0, local = 0;
  for (const SweepKernel& k : sweep_kernels()) {
    const std::vector<double> want = run_on_interp(k, {});
    Params shapes;
    for (size_t i = 0; i < k.inputs.size(); ++i) shapes.push_back(param_like(k.inputs[i].uop(), i));
    const UOp plain = simplify_ranges(k.ast(shapes));
    for (const char* gpu : {"CUDA", "HIP"}) {
      const ScopedEnv as_gpu("INTERP_TARGET", gpu);
      for (const std::vector<Opt>& o : workgroup_opt_lists(plain, Target::of(gpu))) {
        std::string what = k.name + " on " + gpu;
        for (const Opt& x : o) what += " " + opt_repr(x);
        SCOPED_TRACE(what);
        grouped += std::ranges::any_of(
            o, [](const Opt& x) { return x.op == OptOp::Group || x.op == OptOp::GroupTop; });
        local += std::ranges::any_of(o, [](const Opt& x) { return x.op == OptOp::Local; });
        EXPECT_EQ(run_on_interp(k, o), want);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 200);
  EXPECT_GT(grouped, 40);
  EXPECT_GT(local, 40);
}

// tinygrad's heuristics group a reduction of few outputs by 16 threads: each stores its share
// into 16 floats of shared memory, a BARRIER, then every thread sums the group's shares and the
// first thread of the group alone stores the row's sum.
TEST(GpuShaped, GroupedReductionsMeetInSharedMemory) {
  const Params p = params({{4}, {4, 4096}});
  const UOp kernel = row_sum_ast(p, 4, 4096);
  const UOp lin = gpu_program(kernel, Target::of("CUDA"));
  EXPECT_EQ(count(lin, Op::Barrier), 1);
  EXPECT_EQ(count(lin, Op::If), 1) << "the row's sum is stored by the group's first thread";
  std::vector<int64_t> shared;
  for (const UOp& u : lin.src())
    if (u.op() == Op::Buffer && u.arg().find_field("addrspace") &&
        u.arg().field("addrspace").as_string() == "LOCAL")
      shared.push_back(static_cast<int64_t>(u.arg().field("size").as_int()));
  EXPECT_EQ(shared, std::vector<int64_t>{16});
  EXPECT_EQ(launch_dims(lin, "gidx"), std::vector<int64_t>{4});
  EXPECT_EQ(launch_dims(lin, "lidx"), std::vector<int64_t>{16});
  const std::vector<float> x = ints(4 * 4096, 41);
  D want(4, 0);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 4096; ++c) want[r] += x[r * 4096 + c];
  EXPECT_EQ(interp_values(kernel, lin, {x}), want);
}

// A grouped reduction inside a loop the launch does not cover (two effects: no range is every
// output's) reuses its shared memory in each iteration: the end of the iteration is a barrier too,
// or a thread storing the next iteration's share would overwrite one another has yet to read.
TEST(GpuShaped, AGroupedReductionInsideALoopWaitsBeforeReusingSharedMemory) {
  const Params p = params({{4}, {1}, {4, 16}});
  const UOp r0 = rng(4, 0), r1 = red_rng(16, 1);
  const UOp sums = kernel_end(
      kernel_store(at(p[0], r0), reduce(Op::Add, at(p[2], r0 * ci(16) + r1), {r1})), {r0});
  const UOp first = kernel_store(at(p[1], ci(0)), at(p[2], ci(0)));
  const std::vector<Opt> group = {{OptOp::Group, 0, 4}};
  const UOp kernel = with_opts(kernel_sink({sums, first}, "test"), group);
  const UOp lin = gpu_program(kernel, Target::of("CUDA"));
  EXPECT_EQ(count(lin, Op::Barrier), 2) << "after the stores, and at the end of each iteration";
  EXPECT_EQ(count(lin, Op::Range), 3) << "the loop over rows, each thread's share, the group's";
  const std::vector<float> a = ints(4 * 16, 44);
  std::map<int64_t, std::shared_ptr<Storage>> bufs;
  const std::vector<int64_t> sizes = {4, 1, 64};
  for (size_t k = 0; k < sizes.size(); ++k)
    bufs.emplace(k, allocate_storage(dtypes::float32, sizes[k]));
  std::memcpy(bufs.at(2)->bytes.data(), a.data(), a.size() * 4);
  interp_run(lin, bufs);
  const float* out = reinterpret_cast<const float*>(bufs.at(0)->bytes.data());
  for (int64_t r = 0; r < 4; ++r) {
    double want = 0;
    for (int64_t c = 0; c < 16; ++c) want += a[static_cast<size_t>(r * 16 + c)];
    EXPECT_EQ(out[r], want) << "row " << r;
  }
  EXPECT_EQ(reinterpret_cast<const float*>(bufs.at(1)->bytes.data())[0], a[0]);
}

// More output ranges than the three launch dimensions share one where their sizes fit together,
// a range beyond its dimension's limit is split over two, and ranges that can be neither are
// refused by name; the values stay the kernel's.
TEST(GpuShaped, LaunchDimensionsFitTheTargetsLimits) {
  Target small = Target::of("CUDA");
  small.global_max = {4, 4, 4};
  // out[r3, r2, r1, r0] = in[r0, r1, r2, r3]: four ranges no loop merge joins
  auto transpose = [](int64_t n) {
    return [n](const Params& p) {
      const UOp r0 = rng(n, 0), r1 = rng(n, 1), r2 = rng(n, 2), r3 = rng(n, 3);
      const UOp in = ((r0 * ci(n) + r1) * ci(n) + r2) * ci(n) + r3;
      const UOp out = ((r3 * ci(n) + r2) * ci(n) + r1) * ci(n) + r0;
      return ast(kernel_store(at(p[0], out), at(p[1], in) * at(p[1], in)), {r0, r1, r2, r3});
    };
  };
  const Params p = params({{16}, {16}});
  const UOp four = with_opts(transpose(2)(p), {});
  const UOp lin = linearize_kernel(bind_kernel(four, param_buffers(four)), small);
  const std::vector<int64_t> g = launch_dims(lin, "gidx");
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0] * g[1] * g[2], 16);
  for (int64_t d : g) EXPECT_LE(d, 4);
  const std::vector<float> x = ints(16, 42);
  D want(16);
  for (int64_t i = 0; i < 16; ++i) {
    const int64_t a = i / 8, b = i / 4 % 2, c = i / 2 % 2, d = i % 2;
    want[static_cast<size_t>(((d * 2 + c) * 2 + b) * 2 + a)] =
        x[static_cast<size_t>(i)] * x[static_cast<size_t>(i)];
  }
  EXPECT_EQ(interp_values(four, lin, {x}), want);
  // one range of 8 over a limit of 4: split into 4 x 2
  const Params q = params({{8}, {8}});
  const UOp r0 = rng(8, 0);
  const UOp eight = ast(kernel_store(at(q[0], r0), at(q[1], r0) + at(q[1], r0)), {r0});
  const UOp split = linearize_kernel(bind_kernel(eight, param_buffers(eight)), small);
  EXPECT_EQ(launch_dims(split, "gidx"), (std::vector<int64_t>{4, 2}));
  const std::vector<float> y = ints(8, 43);
  D twice;
  for (float v : y) twice.push_back(2.0 * v);
  EXPECT_EQ(interp_values(eight, split, {y}), twice);
  // four ranges of 3: no two fit one dimension of 4
  const Params r = params({{81}, {81}});
  const UOp threes = transpose(3)(r);
  expect_error([&] { linearize_kernel(bind_kernel(threes, param_buffers(threes)), small); },
               "the 4 launch dimensions (3, 3, 3, 3) cannot be grouped into 3");
}

// A BARRIER that some threads of a workgroup skip (inside an IF) would hang a GPU: INTERP refuses
// it by name instead of running on.
TEST(GpuShaped, ABarrierInDivergentControlFlowIsAnError) {
  const UOp two = UOp::cint(2, dtypes::int32);
  const UOp lidx = UOp::make(Op::Special, dtypes::int32, {two}, Arg::string("lidx0"));
  const UOp buf =
      UOp::make(Op::Buffer, dtypes::float32, {},
                Arg::record("ParamArg", {{"slot", Arg::integer(0)}, {"size", Arg::integer(2)}}));
  const UOp at_thread = UOp::make(Op::Index, dtypes::float32, {buf, lidx});
  const UOp first = lidx.lt(UOp::cint(1, dtypes::int32));
  const UOp gate = UOp::make(Op::If, dtypes::void_, {first, at_thread});
  const UOp barrier = UOp::make(Op::Barrier, dtypes::void_, {});
  const UOp end_gate = UOp::make(Op::EndIf, dtypes::void_, {gate});
  const UOp sink = UOp::make(Op::Sink, dtypes::void_, {});
  const UOp lin = UOp::make(Op::Linear, dtypes::void_,
                            {two, lidx, buf, at_thread, first, gate, barrier, end_gate, sink});
  std::map<int64_t, std::shared_ptr<Storage>> bufs{{0, allocate_storage(dtypes::float32, 2)}};
  expect_error([&] { interp_run(lin, bufs); },
               "the threads of a workgroup reach different BARRIERs");
}

// A grouped sum (shared memory, a barrier, a store by the group's first thread) renders for NVPTX
// and AMDGPU and compiles on this machine: the PTX has the kernel's entry, its workgroup and thread
// registers, shared memory and the barrier (and ptxas accepts it where the CUDA toolkit is
// installed); the code object for each of HIP's architectures defines the kernel and its
// descriptor.
TEST(GpuCompile, AGroupedSumCompilesForNvptxAndAmdgpu) {
  const UOp sum = row_sum_ast(params({{4}, {4, 4096}}), 4, 4096);
  const RenderedKernel k =
      render_llvm(gpu_program(sum, Target::of("CUDA")), LlvmTarget::Nvptx, "r_4_16_256");
  EXPECT_EQ(k.name, "r_4_16_256");
  EXPECT_EQ(k.global_size, (std::array<int64_t, 3>{4, 1, 1}));
  EXPECT_EQ(k.local_size, (std::array<int64_t, 3>{16, 1, 1}));
  const std::string ptx = compile_ptx(k.ir);
  for (const char* part : {".entry r_4_16_256", "%ctaid.x", "%tid.x", ".shared", "bar.sync"})
    EXPECT_NE(ptx.find(part), std::string::npos) << part << " in\n" << ptx;
  if (ptxas_available()) {
    EXPECT_EQ(ptxas_error(ptx), std::nullopt);
  } else {
    std::printf("ptxas (CUDA toolkit) not installed: the PTX is not assembled here\n");
  }
  const RenderedKernel h =
      render_llvm(gpu_program(sum, Target::of("HIP")), LlvmTarget::Amdgpu, "r_4_16_256");
  EXPECT_NE(h.ir.find("\"amdgpu-flat-work-group-size\"=\"1,16\""), std::string::npos);
  for (const char* arch : {"gfx90a", "gfx1030", "gfx1100"})
    EXPECT_TRUE(code_object_exports(compile_amdgpu(h.ir, arch), "r_4_16_256")) << arch;
  EXPECT_FALSE(code_object_exports(compile_amdgpu(h.ir), "r_4_16")) << "another name";
}

// What cannot compile is refused naming the target and the reason: IR that does not parse, a CPU
// thread's core_id in a GPU kernel, bytes that are no code object; a float64 sin calls the
// device's math library, linked in; a kernel name that is no identifier is made one.
TEST(GpuCompile, WhatCannotCompileIsNamed) {
  expect_error([] { compile_ptx("define void @k( {"); },
               "CUDA: the kernel's LLVM IR does not parse");
  expect_error([] { compile_amdgpu("not IR"); }, "HIP: the kernel's LLVM IR does not parse");
  EXPECT_FALSE(code_object_exports("not an ELF file", "kernel"));
  const Params p = params({{8}, {8}});
  const UOp r0 = rng(8, 0);
  const UOp copy = ast(kernel_store(at(p[0], r0), at(p[1], r0)), {r0});
  const std::vector<Opt> two_threads = {{OptOp::Thread, 0, 2}};
  const UOp threaded = with_opts(copy, two_threads);
  const UOp cpu_program =
      linearize_kernel(bind_kernel(threaded, param_buffers(threaded)), Target::of("CPU"));
  expect_error([&] { render_llvm(cpu_program, LlvmTarget::Nvptx, "k"); },
               "CUDA: a CPU thread's core_id in a GPU kernel");
  // float64 sin comes from the device's math library, linked in: ocml (Debian's
  // rocm-device-libs) for HIP, libdevice (the CUDA toolkit, where installed) for CUDA
  const UOp sine =
      ast(kernel_store(at(p[0], r0),
                       at(p[1], r0).cast(dtypes::float64).alu(Op::Sin, {}).cast(dtypes::float32)),
          {r0});
  const RenderedKernel hip_sine =
      render_llvm(gpu_program(sine, Target::of("HIP")), LlvmTarget::Amdgpu, "sine");
  EXPECT_NE(hip_sine.ir.find("@__ocml_sin_f64"), std::string::npos);
  EXPECT_TRUE(code_object_exports(compile_amdgpu(hip_sine.ir), "sine"));
  const RenderedKernel cuda_sine =
      render_llvm(gpu_program(sine, Target::of("CUDA")), LlvmTarget::Nvptx, "sine");
  EXPECT_NE(cuda_sine.ir.find("@__nv_sin("), std::string::npos);
  if (ptxas_available()) {  // the toolkit is here, libdevice with it
    const std::string ptx = compile_ptx(cuda_sine.ir);
    EXPECT_EQ(ptx.find("__nv_sin"), std::string::npos) << "linked in, not called";
    EXPECT_EQ(ptxas_error(ptx), std::nullopt);
  } else {
    expect_error([&] { compile_ptx(cuda_sine.ir); }, "which comes with the CUDA toolkit");
  }
  const RenderedKernel named =
      render_llvm(gpu_program(copy, Target::of("CUDA")), LlvmTarget::Nvptx, "2 kernels-x");
  EXPECT_EQ(named.name, "k_2_kernels_x");
  EXPECT_NE(compile_ptx(named.ir).find(".entry k_2_kernels_x"), std::string::npos);
  // a device newer than LLVM 15 is named, not compiled for no processor in particular
  const RenderedKernel amd = render_llvm(gpu_program(copy, Target::of("HIP")), LlvmTarget::Amdgpu);
  expect_error([&] { compile_amdgpu(amd.ir, "gfx1200"); }, "does not know the processor gfx1200");
  expect_error([&] { compile_ptx(named.ir, "sm_100"); }, "does not know the processor sm_100");
}

// ---- memory coalescing: tinygrad's expectations (test/opt/test_gen_float4.py)

namespace {
// The CPU target with vectors of `bytes` (tinygrad's float4: 16; the host's may be wider).
Target cpu_with_vectors(int64_t bytes, bool unaligned) {
  Target t = Target::of("CPU");
  t.vector_bytes = bytes;
  t.unaligned_vectors = unaligned;
  return t;
}
// A kernel AST lowered with `o` for CPU (its PARAMs bound to buffers of their sizes), with
// tinygrad's 4-float vectors, each starting at a multiple of its length, unless `vector_bytes` and
// `unaligned` (the CPU's own: vectors start anywhere) say otherwise.
UOp lowered(const UOp& kernel, const std::vector<Opt>& o, int64_t vector_bytes = 16,
            bool unaligned = false) {
  const UOp ast = with_opts(kernel, o);
  return linearize_kernel(bind_kernel(ast, param_buffers(ast)),
                          cpu_with_vectors(vector_bytes, unaligned));
}
// The kernel the last realize ran, lowered with `o`.
UOp lowered_last_kernel(const std::vector<Opt>& o) {
  EXPECT_EQ(last_kernel_asts().size(), 1u);
  return lowered(last_kernel_asts().at(0), o);
}
// (vector loads, vector stores) of n lanes of dtype d in a program
std::pair<int, int> vector_accesses(const UOp& lin, DType d = dtypes::float32, int64_t n = 4) {
  auto lanes = [&](const UOp& shrink) {
    return shrink.op() == Op::Shrink && shrink.src(2).src(0).arg().as_int() == n;
  };
  int loads = 0, stores = 0;
  for (const UOp& u : lin.src()) {
    if (u.op() == Op::Load && lanes(u.src(0)) && u.dtype() == d) ++loads;
    if (u.op() == Op::Store && lanes(u.src(0)) && u.src(1).dtype() == d) ++stores;
  }
  return {loads, stores};
}
Tensor realized(Dims shape) { return Tensor::empty(std::move(shape)).realize(); }
}  // namespace

TEST(Coalescing, Float4Basic) {
  (realized({2, 8}) + realized({2, 8})).realize();
  EXPECT_EQ(vector_accesses(lowered_last_kernel({upcast(0, 4)})), std::pair(2, 1));
}
TEST(Coalescing, Float4Multidim) {
  (realized({2, 8}) + realized({2, 8})).realize();
  EXPECT_EQ(vector_accesses(lowered_last_kernel({upcast(0, 4), upcast(0, 2)})), std::pair(4, 2));
}
TEST(Coalescing, Float4UnalignedLoad) {
  const Tensor a = realized({9}).shrink({{1, 9}}), b = realized({9}).shrink({{1, 9}});
  (a + b).realize();
  EXPECT_EQ(vector_accesses(lowered_last_kernel({upcast(0, 4)})), std::pair(0, 1));
}
TEST(Coalescing, Float4MultidimUnalignedLoad) {
  const Tensor a = realized({2, 9}).shrink({{0, 2}, {1, 9}}),
               b = realized({2, 9}).shrink({{0, 2}, {1, 9}});
  (a + b).realize();
  EXPECT_EQ(vector_accesses(lowered_last_kernel({upcast(1, 4), upcast(1, 2)})), std::pair(0, 2));
}
TEST(Coalescing, Float4Expand) {
  const Tensor a = realized({9}).shrink({{1, 9}});
  const Tensor b = realized({2}).reshape({2, 1}).expand({2, 4}).reshape({8});
  (a + b).realize();
  EXPECT_EQ(vector_accesses(lowered_last_kernel({upcast(0, 4)})), std::pair(0, 1));
}
TEST(Coalescing, Float4Heterogeneous) {
  (realized({8}) + realized({9}).shrink({{1, 9}})).realize();
  EXPECT_EQ(vector_accesses(lowered_last_kernel({upcast(0, 4)})), std::pair(1, 1));
}
// On the CPU a vector may start at any element, so the runs of a root start where its lanes
// start: b[1:9] reads as 4-lane vectors from element 1 (tinygrad's float4 reads it lane by lane,
// Float4UnalignedLoad above), and 16 lanes from element 1 as one 16-lane vector, where aligned runs
// would take 8 + 4 + 2 + 1 + 1 accesses.
TEST(Coalescing, OnTheCpuRunsStartWhereTheLanesStart) {
  const Tensor a = realized({9}).shrink({{1, 9}}), b = realized({9}).shrink({{1, 9}});
  (a + b).realize();
  const UOp kernel = last_kernel_asts().at(0);
  EXPECT_EQ(vector_accesses(lowered(kernel, {upcast(0, 4)}, 16, true)), std::pair(2, 1));
  const Tensor c = realized({17}).shrink({{1, 17}});
  (c + realized({16})).realize();
  const UOp wide = last_kernel_asts().at(0);
  EXPECT_EQ(vector_accesses(lowered(wide, {upcast(0, 16)}, 64, true), dtypes::float32, 16),
            std::pair(2, 1));
  EXPECT_EQ(vector_accesses(lowered(wide, {upcast(0, 16)}, 64, false), dtypes::float32, 16),
            std::pair(1, 1));
}
// tinygrad's test_float4_aligned_variable / unaligned_variable: a + b[x : x + 4] with a variable
// x in [0, 4] that is a multiple of 4 reads both with one vector load each (and stores one); a
// multiple of 2 only a
TEST(Coalescing, Float4AlignedAndUnalignedVariable) {
  for (const auto& [multiple, loads] : {std::pair{4, 2}, std::pair{2, 1}}) {
    const UOp x = UOp::variable("x", 0, 4, dtypes::index, multiple);
    const UOp out = param_like(Tensor::empty({4}).uop(), 0), a = param_like(realized({4}).uop(), 1),
              b = param_like(realized({12}).uop(), 2), r = rng(4, 0);
    const UOp lin =
        lowered(ast(kernel_store(at(out, r), at(a, r) + at(b, x + r)), {r}), {upcast(0, 4)});
    EXPECT_EQ(vector_accesses(lin), std::pair(loads, 1)) << "multiple of " << multiple;
  }
  expect_error<GraphError>([] { UOp::variable("x", 0, 4, dtypes::index, 0); },
                           "variable x: multiple_of must be positive, got 0");
}
// tinygrad's arange(32) kernel (out[i] = i; Tensor::arange fills its buffer on the host) with
// UPCAST(0, 4): one 4-wide int store, no loads
TEST(Coalescing, ArangeUpcastStoresInt4) {
  const UOp out = param_like(Tensor::empty({32}, dtypes::int32).uop(), 0), r0 = rng(32, 0);
  const UOp lin =
      lowered(ast(kernel_store(at(out, r0), r0.cast(dtypes::int32)), {r0}), {upcast(0, 4)});
  EXPECT_EQ(vector_accesses(lin, dtypes::int32), std::pair(0, 1));
  EXPECT_EQ(count(lin, Op::Load), 0);
}
// On a target with wider vectors (the CPU with AVX: 32 bytes; AVX-512: 64) runs of 8 and 16
// lanes are one access each; a run is never longer than the target's vector, nor unaligned.
TEST(Coalescing, RunsAreAsLongAsTheTargetsVectors) {
  (realized({4, 16}) + realized({4, 16})).realize();
  const UOp kernel = last_kernel_asts().at(0);
  const std::vector<Opt> sixteen = {upcast(0, 4), upcast(0, 4)};
  EXPECT_EQ(vector_accesses(lowered(kernel, sixteen, 16), dtypes::float32, 4), std::pair(8, 4));
  EXPECT_EQ(vector_accesses(lowered(kernel, sixteen, 32), dtypes::float32, 8), std::pair(4, 2));
  EXPECT_EQ(vector_accesses(lowered(kernel, sixteen, 32), dtypes::float32, 4), std::pair(0, 0));
  EXPECT_EQ(vector_accesses(lowered(kernel, sixteen, 64), dtypes::float32, 16), std::pair(2, 1));
  // 8 lanes from element 4 on: runs of 4, the longest the start's alignment allows
  const Tensor a = realized({12}).shrink({{4, 12}}), b = realized({12}).shrink({{4, 12}});
  (a + b).realize();
  EXPECT_EQ(
      vector_accesses(lowered(last_kernel_asts().at(0), {upcast(0, 8)}, 32), dtypes::float32, 4),
      std::pair(4, 0));
  // the CPU's own target is as wide as the host's SIMD registers, at least tinygrad's 16 bytes
  EXPECT_GE(Target::of("CPU").vector_bytes, 16);
  EXPECT_EQ(Target::of("INTERP").vector_bytes, 16);
}

// Lanes at indices under one gate, where(g, i + c, Invalid), read as one vector under that gate
// (a LOAD of a SHRINK with an alternative and the gate; the CPU renders it with a select of the
// address and of the vector): a gather by an index read from memory, whose range check gates a
// row, and a pad of rows, whose rows are gated as a whole.
TEST(Coalescing, LanesUnderOneGateReadAsOneGatedVector) {
  auto gated_vector_loads = [](const UOp& lin, int64_t lanes = 4) {
    return std::ranges::count_if(lin.src(), [&](const UOp& u) {
      return u.op() == Op::Load && u.src(0).op() == Op::Shrink && u.nsrc() == 3 &&
             u.src(0).src(2).src(0).arg().as_int() == lanes;
    });
  };
  Tensor idx = Tensor::from_vector(std::vector<int32_t>{3, -1, 9, 12}, {4}, dtypes::int32);
  Tensor::rand({10, 8}, 1).realize()[idx.realize()].realize();
  const UOp gather = lowered_last_kernel({upcast(1, 4)});
  EXPECT_EQ(vector_accesses(gather), std::pair(1, 1));
  EXPECT_EQ(gated_vector_loads(gather), 1);
  const std::string ir = render_llvm(gather).ir;
  EXPECT_NE(ir.find("load <4 x float>, ptr %"), std::string::npos);
  EXPECT_NE(ir.find(", <4 x float> %"), std::string::npos) << "the alternative's select";
  // (the padded rows and columns merge into one loop: 4 lanes of it lie in one row)
  (Tensor::rand({6, 8}, 2).realize().pad({{1, 1}, {0, 0}}) * 2).realize();
  const UOp rows = lowered_last_kernel({upcast(0, 4)});
  EXPECT_EQ(gated_vector_loads(rows), 1);
  EXPECT_EQ(count(rows, Op::Load), 1);
  // columns padded by 4 on each side: the gate 4 <= c*4 + l < 12 is 1 <= c < 3 for every lane
  (Tensor::rand({6, 8}, 3).realize().pad({{0, 0}, {4, 4}}) * 2).realize();
  EXPECT_EQ(gated_vector_loads(lowered_last_kernel({upcast(1, 4)})), 1);
  // by 1 and 3: the source's columns c*4 + l - 1; lanes 1 and 2 (source columns c*4, c*4 + 1,
  // both valid where c < 2) are a run of 2, lane 0 and 3 read alone
  (Tensor::rand({6, 8}, 4).realize().pad({{0, 0}, {1, 3}}) * 2).realize();
  const UOp cols = lowered_last_kernel({upcast(1, 4)});
  EXPECT_EQ(gated_vector_loads(cols), 0);
  EXPECT_EQ(gated_vector_loads(cols, 2), 1);
  EXPECT_EQ(count(cols, Op::Load), 3);
}

// A store of lanes under one gate writes one vector where the gate holds (an IF around a vector
// STORE): out[r0*4 + r1] = in[r0*4 + r1] for the rows r0 < 2 of 4 (the loops merge into one of
// 16 before the opts; its gate r < 8 holds for all 4 lanes of r' * 4 + l or none)
TEST(Coalescing, LanesUnderOneGateWriteAsOneGatedVector) {
  auto copy_rows = [](const Params& p) {
    const UOp r0 = rng(4, 0), r1 = rng(4, 1), i = r0 * ci(4) + r1;
    return ast(kernel_store(at(p[0], r0.lt(ci(2)).where(i, invalid())), at(p[1], i)), {r0, r1});
  };
  Tensor in = Tensor::rand({16}, 5).realize();
  const UOp out = param_like(Tensor::empty({8}).uop(), 0), src = param_like(in.uop(), 1);
  const UOp lin = lowered(copy_rows({out, src}), {upcast(0, 4)});
  EXPECT_EQ(vector_accesses(lin), std::pair(1, 1));
  EXPECT_EQ(count(lin, Op::If), 1);
  const std::vector<double> hin = in.to_doubles();
  EXPECT_EQ(custom_kernel({Tensor::empty({8}), in}, copy_rows)[0].to_doubles(),
            D(hin.begin(), hin.begin() + 8));
}

// tinygrad's 64x64 matmul with UPCAST(1, 4), UPCAST(0, 2), UNROLL(0, 2): 2-wide loads of A,
// 4-wide loads of B, two 4-wide stores; the accumulator keeps the 2 unrolled lanes of each of the
// 8 outputs on the CPU (16 elements; tinygrad's 8 fold them in each step, rules/reduce.rw)
TEST(Coalescing, MatmulUpcastsAndUnroll) {
  realized({64, 64}).matmul(realized({64, 64})).realize();
  const UOp lin = lowered_last_kernel({upcast(1, 4), upcast(0, 2), unroll(0, 2)});
  std::vector<int64_t> regs;
  for (const UOp& u : lin.src())
    if (u.op() == Op::Buffer && is_register(u))
      regs.push_back(static_cast<int64_t>(u.arg().field("size").as_int()));
  EXPECT_EQ(regs, std::vector<int64_t>{16});
  EXPECT_EQ(vector_accesses(lin, dtypes::float32, 2).first, 2);  // A: 2 rows x 2 unrolled
  int b_loads = 0, out_stores = 0;
  for (const UOp& u : lin.src()) {
    if (u.op() == Op::Load && u.src(0).op() == Op::Shrink &&
        !is_register(u.src(0).src(0).op() == Op::After ? u.src(0).src(0).src(0)
                                                       : u.src(0).src(0)) &&
        u.src(0).src(2).src(0).arg().as_int() == 4)
      ++b_loads;
    if (u.op() == Op::Store && u.src(0).op() == Op::Shrink && u.src(0).src(0).op() == Op::Buffer &&
        !is_register(u.src(0).src(0)))
      ++out_stores;
  }
  EXPECT_EQ(b_loads, 2);     // B: 4 columns x 2 unrolled rows
  EXPECT_EQ(out_stores, 2);  // two rows of 4
}

// Loops that index as one merge (tinygrad's pm_simplify_ranges): a contiguous (2, 3, 4) add runs
// one loop of 24; a transposed read keeps its two loops (merged, it would need a division). The
// ranges of a REDUCE merge alike.
TEST(Coalescing, NestedRangesThatFuseGiveOneRange) {
  (realized({2, 3, 4}) + realized({2, 3, 4})).realize();
  EXPECT_EQ(count(lowered_last_kernel({}), Op::Range), 1);
  (realized({2, 8}) + realized({2, 8})).realize();
  EXPECT_EQ(count(lowered_last_kernel({}), Op::Range), 1);
  (realized({4, 8}) + realized({8, 4}).transpose()).realize();
  EXPECT_EQ(count(lowered_last_kernel({}), Op::Range), 2);
  // reductions too: a sum of all of (2, 3, 4) runs one loop, a sum of (4, 8, 16) over its last
  // two axes one reduction loop inside its output loop; the sum of a transpose keeps both
  realized({2, 3, 4}).sum().realize();
  EXPECT_EQ(count(lowered_last_kernel({}), Op::Range), 1);
  realized({4, 8, 16}).sum({1, 2}).realize();
  EXPECT_EQ(count(lowered_last_kernel({}), Op::Range), 2);
  realized({4, 8}).transpose().sum().realize();
  EXPECT_EQ(count(lowered_last_kernel({}), Op::Range), 2);
}

// A gated index is simplified where its gate holds (tinygrad's gated_given_valid): a clause that
// bounds an expression, e < 125 with e = r*24 + i, makes e // 125 zero and e % 125 e itself; a
// gate clause e % 25 < 20 bounds the remainder alike. A gated index that reads a buffer keeps its
// math (that read runs where the gate fails too).
TEST(IndexMath, AGatedIndexIsSimplifiedWhereItsGateHolds) {
  const UOp r = red_rng(6, 1), i = rng(24, 0), e = r * ci(24) + i;
  auto has = [](const UOp& u, Op op) {
    const std::vector<UOp> all = toposort(u);
    return std::ranges::any_of(all, [&](const UOp& x) { return x.op() == op; });
  };
  const UOp gate = e.lt(ci(125));
  const UOp simple = simplify_ranges(
      std::vector<UOp>{gate.where(e.floordiv(125) * ci(500) + e.floormod(125), invalid())})[0];
  EXPECT_FALSE(has(simple, Op::FloorDiv)) << render(simple);
  EXPECT_FALSE(has(simple, Op::FloorMod)) << render(simple);
  EXPECT_EQ(simple, gate.where(e, invalid())) << render(simple);
  // two clauses, one of them a remainder
  const UOp both = gate & e.floormod(25).lt(ci(20));
  const UOp rem =
      simplify_ranges(std::vector<UOp>{both.where(e.floormod(25).floordiv(20), invalid())})[0];
  EXPECT_FALSE(has(rem, Op::FloorDiv)) << render(rem);
  // not a gated index (no Invalid), or one that reads a buffer: the math stays
  const UOp plain = simplify_ranges(std::vector<UOp>{gate.where(e.floordiv(125), ci(7))})[0];
  EXPECT_TRUE(has(plain, Op::FloorDiv)) << render(plain);
  const UOp b = buffer_uop(dtypes::int32, 1, 128, "CPU");
  const UOp read = simplify_ranges(
      std::vector<UOp>{gate.where(b.index({e.floordiv(125)}).cast(dtypes::index), invalid())})[0];
  EXPECT_TRUE(has(read, Op::FloorDiv)) << render(read);
}

// ---- effects in order, loops, and what late codegen refuses

// three effects in a chain: each runs once (the middle one read-modify-writes)
TEST_P(KernelAst, ThreeOrderedEffectsRunOnceEach) {
  auto k = [](const Params& p) {
    const UOp x = at(p[0], ci(0)), y = at(p[1], ci(0)), z = at(p[2], ci(0));
    return kernel_sink(
        {kernel_store(y, x), kernel_store(x, x + x.const_like(10.0)), kernel_store(z, x + y)});
  };
  std::vector<Tensor> r =
      custom_kernel({tensor({1}, {1}), Tensor::empty({1}), Tensor::empty({1})}, k);
  EXPECT_EQ(r[0].to_doubles(), (D{11}));
  EXPECT_EQ(r[1].to_doubles(), (D{1}));
  EXPECT_EQ(r[2].to_doubles(), (D{12}));
}

// a later effect may read other elements of a buffer an earlier one wrote (they run in order)
TEST_P(KernelAst, ALaterPassReadsWhatAnEarlierOneWrote) {
  auto k = [](const Params& p) {
    const UOp i = rng(4, 0), j = rng(4, 1);
    return kernel_sink(
        {kernel_end(kernel_store(at(p[0], i), at(p[1], i) * at(p[1], i).const_like(2.0)), {i}),
         kernel_end(kernel_store(at(p[1], j), at(p[0], ci(3) - j)), {j})});
  };
  std::vector<Tensor> r = custom_kernel({Tensor::empty({4}), tensor({1, 2, 3, 4}, {4})}, k);
  EXPECT_EQ(r[0].to_doubles(), (D{2, 4, 6, 8}));
  EXPECT_EQ(r[1].to_doubles(), (D{8, 6, 4, 2}));
}

// a reduction over another's result over the same RANGE is not merged with it (it must run
// after) and is refused (a loop is one place in the program); over its own RANGE it runs
TEST_P(KernelAst, AReductionOfAReductionOverOneRangeIsRefused) {
  auto k = [](const Params& p, bool own) {
    const UOp r = red_rng(4, 0), s = own ? red_rng(4, 1) : r;
    return kernel_sink({kernel_store(
        at(p[0], ci(0)), reduce(Op::Add, at(p[1], r) - reduce(Op::Add, at(p[1], s), {s}), {r}))});
  };
  auto run = [&](bool own) {
    return custom_kernel({Tensor::empty({1}), tensor({1, 2, 3, 4}, {4})},
                         [&](const Params& p) { return k(p, own); })[0]
        .to_doubles();
  };
  expect_error<GraphError>([&] { run(false); }, "is looped over twice");
  EXPECT_EQ(run(true), (D{-30}));  // sum_k (x_k - 10) = 10 - 40
}

// a product over a broadcast axis with the default opts (an upcast of the output, an unroll of
// the reduction the value does not vary along): every term counts
TEST_P(KernelAst, ProductOverABroadcastAxisWithDefaultOpts) {
  const Tensor a = tensor({1, 2, 1, 1}, {4});
  EXPECT_EQ(a.reshape({4, 1}).expand({4, 16}).prod({1}).to_doubles(), (D{1, 65536, 1, 1}));
}

// refused: a RANGE closed by two ENDs; an opt that splits a loop the store's index ignores
TEST(LateCodegen, RefusesWhatItCannotOrder) {
  const Params p = params({{4}, {4}});
  const UOp i = rng(4, 0);
  expect_error<GraphError>(
      [&] {
        program(kernel_sink({kernel_end(kernel_store(at(p[0], i), at(p[1], i)), {i}),
                             kernel_end(kernel_store(at(p[1], i), at(p[1], i)), {i})}),
                {4, 4});
      },
      "is closed by two ENDs");
  const Params g = params({{2, 2}, {2, 4}, {4, 2}});
  auto gemm = [&](const std::vector<Opt>& o) {  // out[i, j] accumulated over a WEAK loop k
    const UOp r0 = rng(2, 0), r1 = rng(2, 1), k = rng(4, 2), c = at(g[0], r0 * ci(2) + r1);
    const UOp acc =
        kernel_end(kernel_store(c, c + at(g[1], r0 * ci(4) + k) * at(g[2], k * ci(2) + r1)), {k});
    return with_opts(kernel_sink({kernel_end(acc, {r0, r1})}), o);
  };
  EXPECT_NO_THROW(program(gemm({}), {4, 8, 8}));
  // an opt that would run its iterations at once is refused by name; the heuristics skip it
  expect_error<KernelOptError>(
      [&] {
        program(gemm({upcast(2, 4)}), {4, 8, 8});
      },
      "UPCAST(2, 4): a store inside the loop does not index with it");
  expect_error<KernelOptError>(
      [&] {
        program(gemm({{OptOp::Thread, 2, 2}}), {4, 8, 8});
      },
      "a store inside the loop does not index with it");
  EXPECT_NO_THROW(program(gemm({upcast(0, 2)}), {4, 8, 8}));
}

// ---- accumulators, default opts and the CPU renderer's memory accesses

namespace {
// the register buffers (accumulators) of a LINEAR program
std::vector<UOp> registers(const UOp& lin) {
  std::vector<UOp> out;
  for (const UOp& u : lin.src())
    if (u.op() == Op::Buffer && is_register(u)) out.push_back(u);
  return out;
}
}  // namespace

// tinygrad's test_zero_fold: Tensor.stack(a, b) of two one-element tensors with its axis upcast
// whole computes nothing: both lanes are plain loads, no ALU op and no loop is left, and one
// 2-wide store writes both
TEST(Opts, UpcastOfAStackOfTwoFoldsToNoAluOps) {
  Tensor::stack({realized({1}), realized({1})}).realize();
  const UOp lin = lowered_last_kernel({upcast(0, 0)});
  int alu = 0;
  for (const UOp& u : lin.src()) alu += groups::alu().contains(u.op()) ? 1 : 0;
  EXPECT_EQ(alu, 0);
  EXPECT_EQ(count(lin, Op::Range), 0);
  EXPECT_EQ(vector_accesses(lin, dtypes::float32, 2), std::pair(0, 1));
}

// tinygrad's test_sum_acc_dtype: sums of bool and int16 accumulate in int32, of half and bfloat16
// in float32
TEST(Opts, SumsAccumulateInTinygradsAccumulatorDtype) {
  for (const auto& [in, acc] :
       {std::pair{dtypes::bool_, dtypes::int32}, std::pair{dtypes::int16, dtypes::int32},
        std::pair{dtypes::float16, dtypes::float32},
        std::pair{dtypes::bfloat16, dtypes::float32}}) {
    Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}).cast(in).realize().sum().realize();
    const std::vector<UOp> regs = registers(lowered_last_kernel({}));
    ASSERT_EQ(regs.size(), 1u) << in.repr();
    EXPECT_EQ(regs[0].dtype(), acc) << in.repr();
  }
}

// The gradient of a 2x2 max pool sums, for each input, the 3x3 pooled places whose window could
// hold it, unrolled whole by the hand-coded opts. A place the stride never reaches has a gate that
// never holds (x < 2 & (x+19)%21 < 20 & (x+19)%21%2 < 1 for one of them): the early symbolic
// stage (rules/symbolic.rw simplify_valid) folds it to False and that lane reads nothing. 4 of
// the 9 places read, as in tinygrad's kernel; with all 9 it ran 5x slower.
TEST(Opts, AnUnrolledWindowsLanesWhoseGateNeverHoldsReadNothing) {
  const ScopedEnv one_thread("CPU_THREADS", "1");
  const Tensor x = Tensor::rand({2, 3, 20, 20}).realize();
  const Tensor seed = Tensor::rand({2, 3, 10, 10}).realize();
  const Tensor pooled = x.max_pool2d();
  pooled.gradient({x}, &seed)[0].realize();
  const UOp ast = simplify_ranges(last_kernel_asts().back());
  const UOp lin = lowered(ast, hand_coded_opts(ast, Target::of("CPU")));
  std::map<int64_t, int> loads_per_buffer;
  for (const UOp& u : lin.src())
    if (u.op() == Op::Load)
      for (const UOp& b : toposort(u.src(0)))
        if (b.op() == Op::Buffer) ++loads_per_buffer[b.arg().field("slot").as_int()];
  ASSERT_FALSE(loads_per_buffer.empty());
  for (const auto& [slot, loads] : loads_per_buffer) EXPECT_EQ(loads, 4) << "PARAM " << slot;
}

// A reduction to one value keeps one accumulator element per unrolled lane and folds them after
// its loop (independent chains inside it); a register tile keeps one per output (the matmul test
// above: 8). The fold's ADDs come after the reduction's END.
TEST(Opts, AnUnrolledSumKeepsItsLanesUntilTheLoopEnds) {
  realized({64}).sum().realize();
  const UOp lin = lowered_last_kernel({unroll(0, 4)});
  const std::vector<UOp> regs = registers(lin);
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].arg().field("size").as_int(), 4);
  const std::vector<Op> ops = ops_of(lin);
  const auto end = std::ranges::find(ops, Op::End);
  ASSERT_NE(end, ops.end());
  EXPECT_EQ(std::count(end, ops.end(), Op::Add), 3);  // ((l0 + l1) + l2) + l3, once
}

// One lane is no split: refused, not looped on
// On the CPU a reduction with several outputs keeps its unrolled lanes in the accumulator too,
// each output's 20 lanes padded to 32 (no vector run of the register holds two outputs' lanes),
// and they add as vectors (rules/reduce.rw, rules/devectorizer.rw vectorize_alu): each output's
// products are a 16-lane and a 4-lane FMA on the row's vector loads, not 20 scalar FMAs and a
// chain of adds per step. INTERP and CPU give the reference loop's values.
TEST(VectorAlu, UnrolledLanesOfAReductionAddAsVectors) {
  const std::vector<float> a = ints(8 * 40, 31), b = ints(40, 32);
  D want(8, 0);
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t k = 0; k < 40; ++k) want[i] += a[i * 40 + k] * b[k];
  const std::vector<Opt> o = {upcast(0, 4), unroll(0, 20)};
  const UOp lin = lowered(matmul_reduce_ast(params({{8, 1}, {8, 40}, {40, 1}}), 8, 40, 1), o,
                          /*vector_bytes=*/64, /*unaligned=*/true);
  const std::vector<UOp> regs = registers(lin);
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].arg().field("size").as_int(), 4 * 32);
  std::multiset<int64_t> fma_lanes;
  for (const UOp& u : lin.src())
    if (u.op() == Op::MulAcc)
      fma_lanes.insert(u.src(0).op() == Op::Stack ? static_cast<int64_t>(u.src(0).nsrc())
                       : u.src(0).op() == Op::Load && u.src(0).src(0).op() == Op::Shrink
                           ? u.src(0).src(0).src(2).src(0).arg().as_int()
                           : 1);
  EXPECT_EQ(fma_lanes, (std::multiset<int64_t>{4, 4, 4, 4, 16, 16, 16, 16}));
  EXPECT_NE(render_llvm(lin).ir.find("@llvm.fma.v16f32"), std::string::npos);
  for (const char* dev : {"INTERP", "CPU"}) {
    if (!device_available(dev)) continue;
    set_default_device(dev);
    Tensor c = custom_kernel(
        {Tensor::empty({8, 1}), tensor(a, {8, 40}), tensor(b, {40, 1})},
        [&](const Params& p) { return with_opts(matmul_reduce_ast(p, 8, 40, 1), o); })[0];
    EXPECT_EQ(c.to_doubles(), want) << dev;
    set_default_device("");
  }
}

TEST(Opts, AnOptOfOneLaneIsRefused) {
  const Params p = params({{4, 8}, {4, 64}, {64, 8}});
  const UOp k = matmul_reduce_ast(p, 4, 64, 8);
  expect_error<KernelOptError>([&] { apply_opts(k, opts({upcast(0, 1)}), Target::of("CPU")); },
                               "UPCAST(0, 1): one lane splits nothing off");
  expect_error<KernelOptError>([&] { apply_opts(k, opts({unroll(0, 1)}), Target::of("CPU")); },
                               "UNROLL(0, 1): one lane splits nothing off");
}

// The hand-coded opts give tinygrad's (its hand_coded_optimizations on the same kernels, CPU
// without threads): an elementwise kernel upcasts its merged axis by 4; a reduction of 32 or less
// unrolls whole, a longer one by 4; a matmul of 1024 outputs or more upcasts both output axes
// (the one some read ignores with the smallest strides first).
TEST(Opts, HandCodedOptsAreTinygrads) {
  SKIP_WHERE_INTERP_RUNS_GPU_KERNELS("INTERP");
  const ScopedEnv one_thread("CPU_THREADS", "1");  // tinygrad's names on one thread
  auto opts_of_last = [] {
    return hand_coded_opts(simplify_ranges(last_kernel_asts().at(0)), Target::of("CPU"));
  };
  (realized({16, 32}) + realized({16, 32})).realize();
  EXPECT_EQ(opts_of_last(), opts({upcast(0, 4)}));  // E_128_4
  realized({16, 32}).matmul(realized({32, 16})).realize();
  EXPECT_EQ(opts_of_last(), opts({unroll(0, 0)}));  // r_16_16_32: 256 outputs
  realized({64, 64}).matmul(realized({64, 64})).realize();
  EXPECT_EQ(opts_of_last(), opts({upcast(1, 4), upcast(0, 4), unroll(0, 4)}));
  EXPECT_EQ(last_kernel_names().at(0), "r_16_16_4_4_16_4");
  realized({16, 32}).sum({1}).realize();
  EXPECT_EQ(opts_of_last(), opts({unroll(0, 0)}));  // r_16_32
  EXPECT_EQ(last_kernel_names().at(0), "r_16_32");
  realized({16, 12}).sum({1}).realize();
  EXPECT_EQ(opts_of_last(), opts({unroll(0, 0)}));  // r_16_12
  realized({256, 256}).sum({0}).realize();
  EXPECT_EQ(opts_of_last(), opts({unroll(0, 4)}));  // r_256_64_4
  EXPECT_EQ(last_kernel_names().at(0), "r_256_64_4");
  // a stack's small gated axis is upcast whole
  Tensor::stack({realized({16, 32}), realized({16, 32})}, -1).realize();
  EXPECT_EQ(last_kernel_names().at(0), "E_512_2");
  // an elementwise kernel's merged axis upcasts by 3 before 4, also where 4 would not divide
  (realized({3072}) + realized({3072})).realize();
  EXPECT_EQ(last_kernel_names().at(0), "E_1024_3");
  (realized({1029}) + realized({1029})).realize();
  EXPECT_EQ(last_kernel_names().at(0), "E_343_3");
  realized({48, 64}).transpose().contiguous().realize();
  EXPECT_EQ(last_kernel_names().at(0), "E_64_12_4");
  // a convolution (the issue's, tinygrad's name)
  realized({1, 3, 32, 32}).conv2d(realized({8, 3, 3, 3})).realize();
  EXPECT_EQ(last_kernel_names().at(0), "r_2_30_10_3_4_3_3_3");
}

// The CPU renderer: vector accesses aligned to their size (buffers start 64-byte aligned), and
// vector stores into a buffer past the caches non-temporal, with a fence before the kernel
// returns; small outputs keep plain stores.
TEST(LlvmRender, VectorAccessesAlignAndLargeOutputsStreamPastTheCaches) {
  for (const int64_t n : {int64_t{1024}, int64_t{4} << 20}) {
    (realized({n}) + realized({n})).realize();
    const std::string ir = render_llvm(lowered_last_kernel({upcast(0, 4)})).ir;
    EXPECT_NE(ir.find("load <4 x float>, ptr %"), std::string::npos);
    EXPECT_NE(ir.find("align 16"), std::string::npos);
    EXPECT_EQ(ir.find("align 4\n"), std::string::npos) << "a vector access aligned to one float";
    const bool large = n * 4 >= (int64_t{8} << 20);
    EXPECT_EQ(ir.find("!nontemporal") != std::string::npos, large) << n;
    EXPECT_EQ(ir.find("fence seq_cst") != std::string::npos, large) << n;
  }
}

// A matmul on the CPU: each float product added to a value is one MulAcc (an FMA; an int matmul
// keeps Mul and Add), the reduce loop is marked for LLVM not to unroll (the opts unroll)
// and the output loops are not; buffers' host memory is 64-byte aligned.
TEST(LlvmRender, ProductsFuseAndReduceLoopsKeepTheirUnroll) {
  for (const DType d : {dtypes::float32, dtypes::float64, dtypes::int32}) {
    (Tensor::empty({16, 16}, d).realize().matmul(Tensor::empty({16, 16}, d).realize())).realize();
    const UOp lin = lowered_last_kernel({upcast(1, 4), upcast(0, 4), unroll(0, 4)});
    // the accumulator keeps each output's 4 unrolled lanes (rules/reduce.rw): each of the 64
    // lanes adds its product with one MulAcc, float32's as 4-lane vector FMAs (vectorize_alu)
    EXPECT_EQ(count(lin, Op::MulAcc), d == dtypes::float32 ? 64 / 4
                                      : d.is_float()       ? 64
                                                           : 0)
        << d.repr();
    const std::string ir = render_llvm(lin).ir;
    EXPECT_EQ(ir.find("@llvm.fma.") != std::string::npos, d.is_float()) << d.repr();
    size_t marked = 0;
    for (size_t at = ir.find("!llvm.loop !"); at != std::string::npos;
         at = ir.find("!llvm.loop !", at + 1))
      ++marked;
    EXPECT_EQ(marked, 1u) << "only the reduce loop of three";
    EXPECT_NE(ir.find("!{!\"llvm.loop.unroll.disable\"}"), std::string::npos);
  }
  for (const int64_t n : {1, 3, 100, 100000}) {
    const std::shared_ptr<Storage> s = allocate_storage(dtypes::float32, n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s->bytes.data()) % 64, 0u) << n;
  }
}

// A STACK of lanes of other vectors (a matmul tile's operands: B's rows transposed into the
// accumulator's lane order, A's row repeated) renders as shufflevectors, never as an
// insertelement of each extracted lane (which LLVM lowered into chains of two-source shuffles:
// 17 per step of a 512x512 matmul's inner loop where one shuffle of two concatenations takes 5).
TEST(LlvmRender, LanesOfOtherVectorsAreShuffledTogether) {
  (Tensor::empty({16, 16}, dtypes::float32)
       .realize()
       .matmul(Tensor::empty({16, 16}, dtypes::float32).realize()))
      .realize();
  const UOp lin = lowered_last_kernel({upcast(1, 4), upcast(0, 4), unroll(0, 4)});
  size_t vector_lanes_stacked = 0;  // STACKs whose every lane is a constant lane of a vector
  for (const UOp& u : lin.src())
    if (u.op() == Op::Stack && std::all_of(u.src().begin(), u.src().end(), [](const UOp& lane) {
          return lane.op() == Op::Index && lane.src(1).op() == Op::Const;
        }))
      ++vector_lanes_stacked;
  EXPECT_GT(vector_lanes_stacked, 0u) << "the tile's operands are STACKs of vector lanes";
  const std::string ir = render_llvm(lin).ir;
  std::set<std::string> extracted;  // the names extractelement defines
  std::istringstream lines(ir);
  size_t shuffles = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name, eq, op;
    words >> name >> eq >> op;
    if (op == "extractelement") extracted.insert(name);
    if (op == "shufflevector") ++shuffles;
    if (op != "insertelement") continue;
    // insertelement <n x T> v, T lane, i64 k: the lane must not be an extracted one
    const size_t comma = line.find(", ");
    std::istringstream rest(line.substr(comma + 2));
    std::string type, lane;
    rest >> type >> lane;
    if (!lane.empty() && lane.back() == ',') lane.pop_back();
    EXPECT_FALSE(extracted.contains(lane)) << line;
  }
  EXPECT_GE(shuffles, vector_lanes_stacked);
}

// max with a constant operand (which the CPU renders as one compare and select): its values are
// the spec's (NaN in, NaN out; of two zeros the second) and its zeros' signs INTERP's, at float32
// and float64, with the constant on either side.
TEST(LlvmRender, MaxWithAConstantKeepsTheSpecsValues) {
  if (!device_available("CPU")) GTEST_SKIP() << "device CPU is not available here";
  const std::vector<double> xs = {NAN, -0.0, 0.0, -1.5, 2.0, INFINITY, -INFINITY, 0.25};
  for (const DType d : {dtypes::float32, dtypes::float64})
    for (const double c : {0.0, -0.0, 1.0, -double{INFINITY}}) {
      std::vector<double> got[2];
      for (int dev = 0; dev < 2; ++dev) {
        set_default_device(dev == 0 ? "INTERP" : "CPU");
        const Tensor x = Tensor::from_vector(xs, {static_cast<int64_t>(xs.size())}, d);
        const Tensor k = Tensor::full({1}, c, d).reshape({}).expand(x.shape());
        // two kernels: in one, the two orders would be one node (Max is commutative there)
        got[dev] = x.maximum(k).to_doubles();
        const std::vector<double> other = k.maximum(x).to_doubles();
        got[dev].insert(got[dev].end(), other.begin(), other.end());
      }
      set_default_device("");
      ASSERT_EQ(got[0].size(), got[1].size());
      for (size_t i = 0; i < got[0].size(); ++i) {
        const double x = xs[i % xs.size()];
        const double a = i < xs.size() ? x : c, b = i < xs.size() ? c : x;
        const double want = std::isnan(a) || std::isnan(b) ? NAN : a > b ? a : b;
        const std::string what = fmt::format("{} max({}, {})", d.repr(), a, b);
        EXPECT_EQ(std::isnan(got[1][i]), std::isnan(want)) << what;
        if (!std::isnan(want)) {
          EXPECT_EQ(got[1][i], want) << what;
          EXPECT_EQ(std::signbit(got[1][i]), std::signbit(want)) << what;
          EXPECT_EQ(std::signbit(got[0][i]), std::signbit(got[1][i])) << what << " (INTERP)";
        }
      }
    }
}

// rules/decompositions.rw: integer multiplication, floor division and floor modulo by a power of
// two run as shifts and masks, negative values too; truncating ones only where nothing is
// negative. The values are those of the plain ops, on both devices.
TEST_P(KernelAst, PowersOfTwoBecomeShiftsAndMasks) {
  const int64_t n = 32;
  auto k = [](const Params& p) {
    const UOp r = rng(32, 0),
              x = r.cast(dtypes::int32) - r.cast(dtypes::int32).const_like(i128{16});
    const UOp c4 = x.const_like(i128{4}), c8 = x.const_like(i128{8});
    const UOp v = x.floordiv(c4) * x.const_like(i128{1000}) + x.floormod(c8) * c8 +
                  r.cast(dtypes::int32).cdiv(c4) - r.cast(dtypes::int32).cmod(c8);
    return ast(kernel_store(at(p[0], r), v), {r});
  };
  D want;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x = i - 16, fd = x >= 0 ? x / 4 : -((-x + 3) / 4), fm = ((x % 8) + 8) % 8;
    want.push_back(static_cast<double>(fd * 1000 + fm * 8 + i / 4 - i % 8));
  }
  EXPECT_EQ(custom_kernel({Tensor::empty({n}, dtypes::int32)}, k)[0].to_doubles(), want);
  const UOp lin = lowered(k({param_like(Tensor::empty({n}, dtypes::int32).uop(), 0)}), {});
  for (const Op op : {Op::FloorDiv, Op::FloorMod, Op::CDiv, Op::CMod}) EXPECT_EQ(count(lin, op), 0);
  EXPECT_GT(count(lin, Op::Shr), 0);
  EXPECT_GT(count(lin, Op::And), 0);
  EXPECT_GT(count(lin, Op::Shl), 0);
}

// A store through a gated index writes where its gate holds (tinygrad's IF/STORE/ENDIF from
// pm_linearize_cleanups): out[i] = a[i] + 1 for the even i < 7 only, the rest keeps its
// contents; a store whose gate never holds writes nothing. Both devices.
TEST_P(KernelAst, GatedStoresWriteWhereTheirGateHolds) {
  const std::vector<float> a = ints(10, 31);
  auto k = [](const Params& p) {
    const UOp r = rng(10, 0), valid = r.lt(ci(7)) & r.floormod(2).eq(ci(0));
    const UOp never = UOp::constant(dtypes::index, Arg::invalid());
    return kernel_sink({kernel_end(kernel_store(at(p[0], valid.where(r, invalid())),
                                                at(p[1], r) + at(p[1], r).const_like(1.0)),
                                   {r}),
                        kernel_store(at(p[0], never), at(p[1], ci(0)))});
  };
  Tensor out = Tensor::full({10}, -5.0).contiguous().realize();
  D want;
  for (int64_t i = 0; i < 10; ++i) want.push_back(i < 7 && i % 2 == 0 ? a[i] + 1 : -5);
  EXPECT_EQ(custom_kernel({out, tensor(a, {10})}, k)[0].to_doubles(), want);
  const UOp lin = program(k(params({{10}, {10}})), {10, 10});
  EXPECT_EQ(count(lin, Op::If), 1);
  EXPECT_EQ(count(lin, Op::EndIf), 1);
  EXPECT_EQ(count(lin, Op::Store), 1);
  const std::vector<Op> ops = ops_of(lin);
  const auto at_if = std::ranges::find(ops, Op::If);
  ASSERT_NE(at_if, ops.end());
  EXPECT_EQ(*(at_if + 1), Op::Store);
  EXPECT_EQ(*(at_if + 2), Op::EndIf);
}

// rules/decompositions.rw lower_index_dtype: the program's index math is int32 where its bounds
// fit and int64 where they do not; nothing of the index dtype is left. A loop over 2^30
// elements counts in int32; its address r * 4 + 3 in the 2^32-element output needs int64.
TEST(LateCodegen, IndexMathLowersToInt32OrInt64) {
  const int64_t n = int64_t{1} << 30;
  // PARAMs shaped after lazy constants: nothing of these sizes is allocated
  const Params p = {param_like(Tensor::full({4 * n}, 0.0).uop(), 0),
                    param_like(Tensor::full({n}, 0.0).uop(), 1)};
  const UOp r = rng(n, 0);
  const UOp lin = lowered(ast(kernel_store(at(p[0], r * ci(4) + ci(3)), at(p[1], r)), {r}), {});
  for (const UOp& u : lin.src()) {
    EXPECT_NE(u.dtype(), dtypes::index) << u.repr(1);
    if (u.op() == Op::Range) EXPECT_EQ(u.dtype(), dtypes::int32);
    if (u.op() == Op::Index && u.src(0).op() == Op::Buffer)
      EXPECT_EQ(u.src(1).dtype(),
                u.src(0).arg().field("size").as_int() > n ? dtypes::int64 : dtypes::int32);
  }
  const std::string ir = render_llvm(lin).ir;
  EXPECT_NE(ir.find("phi i32"), std::string::npos);
  EXPECT_NE(ir.find("sext i32"), std::string::npos);  // the loop index widened for the address
}

// a bool cast to an index is 0 or 1 at the index's width, on both devices: out[r] = in[r + (r < 3)]
TEST_P(KernelAst, ABoolCastToAnIndexCountsAsZeroOrOne) {
  const std::vector<float> a = ints(9, 41);
  auto k = [](const Params& p) {
    const UOp r = rng(8, 0);
    return ast(kernel_store(at(p[0], r), at(p[1], r + r.lt(ci(3)).cast(dtypes::index))), {r});
  };
  D want;
  for (int64_t i = 0; i < 8; ++i) want.push_back(a[i + (i < 3 ? 1 : 0)]);
  EXPECT_EQ(custom_kernel({Tensor::empty({8}), tensor(a, {9})}, k)[0].to_doubles(), want);
}

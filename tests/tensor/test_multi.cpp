// Tensors over several devices (rules/multi.rw), with tinygrad's numbers (test/test_multitensor.py
// and test/unit/test_allreduce.py, its CPU device): shard, shard_like, elementwise ops, reductions
// across devices (allreduce), movement ops and their errors, copies back to one device.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/graph.h"
#include "tensor/function.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"
#include "tests/scoped_env.h"

using namespace tinyrw;

namespace {

#define REQUIRE_CPU() \
  if (!device_available("CPU")) GTEST_SKIP() << "the CPU device is not available here"

const std::vector<std::string> kTwo{"CPU:1", "CPU:2"};
const std::vector<std::string> kFour{"CPU:1", "CPU:2", "CPU:3", "CPU:4"};

Tensor floats(std::vector<float> v, Dims shape) {
  return Tensor::from_vector(v, std::move(shape)).to("CPU").realize();
}

int count_names(const std::string& prefix) {
  int n = 0;
  for (const std::string& k : last_kernel_names()) n += k.rfind(prefix, 0) == 0;
  return n;
}

TEST(Multi, ShardAndAddRunsOneKernelPerDevice) {
  REQUIRE_CPU();
  Tensor xs = floats({0, 1, 2, 3, 4, 5, 6, 7}, {8}).shard(kTwo, 0);
  EXPECT_EQ(xs.devices(), kTwo);
  EXPECT_EQ(xs.device(), "('CPU:1', 'CPU:2')");
  EXPECT_EQ(xs.shard_axis(), 0);
  EXPECT_EQ(xs.shape(), (Dims{8}));
  xs.realize();
  Tensor y = (xs + 1).realize();
  EXPECT_EQ(last_kernel_count(), 2);
  EXPECT_EQ(y.shard_axis(), 0);
  EXPECT_EQ(y.data<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(xs.sum().data<float>(), (std::vector<float>{28}));
}

// A kernel whose code depends on the device (a whole value cut into each device's block: device k
// reads it from 5k) is one kernel with tinygrad's _device_num variable: compiled once, launched
// once per device with its number, on CPU and on INTERP.
TEST(Multi, AKernelThatDependsOnTheDeviceCompilesOnce) {
  for (const char* base : {"INTERP", "CPU"}) {
    if (!device_available(base)) continue;
    SCOPED_TRACE(base);
    std::vector<std::string> devs;
    for (int k = 1; k <= 3; ++k) devs.push_back(fmt::format("{}:{}", base, k));
    Tensor whole = Tensor::arange(15).to(devs[0]).shard(devs, std::nullopt).realize();
    Tensor xs = Tensor::full({15}, 100, dtypes::int32).contiguous().shard(devs, 0).realize();
    Tensor y = (xs + whole * 3).realize();
    EXPECT_EQ(last_kernel_count(), 3);
    EXPECT_EQ(last_compile_count(), 1);
    ASSERT_EQ(last_kernel_asts().size(), 3u);
    EXPECT_EQ(last_kernel_asts()[0], last_kernel_asts()[2]);
    bool has_variable = false;
    for (const UOp& u : toposort(last_kernel_asts()[0]))
      has_variable |= u.op() == Op::DefineVar && u.arg().items()[0].as_string() == "_device_num";
    EXPECT_TRUE(has_variable);
    std::vector<int32_t> want;
    for (int32_t i = 0; i < 15; ++i) want.push_back(100 + 3 * i);
    EXPECT_EQ(y.data<int32_t>(), want);
  }
}

// A function (tinygrad's @function) called on sharded tensors: inlined or precompiled, its
// body runs on each device's part and its result is what the body gives on one device.
TEST(Multi, FunctionsTakeShardedArguments) {
  REQUIRE_CPU();
  for (const bool precompile : {false, true}) {
    SCOPED_TRACE(precompile ? "precompiled" : "inlined");
    auto f = function([](Tensor a, Tensor b) { return (a * b + 1).sum({0}); },
                      {.name = "f", .precompile = precompile});
    Tensor x = Tensor::arange(8).cast(dtypes::float32).reshape({4, 2}).contiguous();
    Tensor w = Tensor::full({4, 2}, 2.0).contiguous();
    const std::vector<float> want = f(x.realize(), w.realize()).data<float>();
    EXPECT_EQ(want, (std::vector<float>{28, 36}));
    for (const std::optional<int> axis : {std::optional<int>(0), std::optional<int>(1)}) {
      Tensor y = f(x.shard(kTwo, axis).realize(), w.shard(kTwo, axis).realize());
      EXPECT_EQ(y.devices(), kTwo);
      EXPECT_EQ(y.data<float>(), want);
    }
  }
}

TEST(Multi, SumsOverEverySharding) {
  REQUIRE_CPU();
  for (std::optional<int> axis :
       {std::optional<int>(0), std::optional<int>(1), std::optional<int>()}) {
    SCOPED_TRACE(axis ? std::to_string(*axis) : "none");
    Tensor m = floats({1, 2, 3, 4}, {2, 2}).shard(kTwo, axis);
    EXPECT_EQ(m.shard_axis(), axis);
    EXPECT_EQ(m.sum().data<float>(), (std::vector<float>{10}));
    EXPECT_EQ(m.sum({0}).data<float>(), (std::vector<float>{4, 6}));
    EXPECT_EQ(m.sum({1}).data<float>(), (std::vector<float>{3, 7}));
    EXPECT_EQ(m.data<float>(), (std::vector<float>{1, 2, 3, 4}));
  }
}

// tinygrad's test_multitensor: A = arange(16) as 4x4, W = 2I, every pair of shardings
TEST(Multi, MatmulOfEveryPairOfShardings) {
  REQUIRE_CPU();
  std::vector<float> a(16), w(16, 0);
  for (int i = 0; i < 16; ++i) a[static_cast<size_t>(i)] = static_cast<float>(i);
  for (int i = 0; i < 4; ++i) w[static_cast<size_t>(i * 5)] = 2;
  const std::vector<std::optional<int>> axes{0, 1, std::nullopt};
  for (std::optional<int> sa : axes)
    for (std::optional<int> sw : axes) {
      SCOPED_TRACE(fmt::format("A {} W {}", sa ? std::to_string(*sa) : "none",
                               sw ? std::to_string(*sw) : "none"));
      Tensor A = floats(a, {4, 4}).shard(kTwo, sa);
      Tensor W = floats(w, {4, 4}).shard(kTwo, sw);
      Tensor out = A.matmul(W);
      const std::vector<float> got = out.data<float>();
      ASSERT_EQ(got.size(), 16u);
      EXPECT_EQ(std::vector<float>(got.begin() + 4, got.begin() + 8),
                (std::vector<float>{8, 10, 12, 14}));
      for (int i = 0; i < 16; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], 2.0f * i);
      // the output's axis, as tinygrad's (A's rows split: the rows; W's columns: the columns;
      // the contracted axis split: reduced across devices, on every device whole)
      if (sa == 0 && !sw) EXPECT_EQ(out.shard_axis(), 0);
      if (!sa && sw == 1) EXPECT_EQ(out.shard_axis(), 1);
      if (sa == 1 && sw == 0) EXPECT_EQ(out.shard_axis(), std::nullopt);
      if (!sa && sw == 0) EXPECT_EQ(out.shard_axis(), std::nullopt);
    }
}

TEST(Multi, UnevenSplitsAndCrossShardReshapesAreRefused) {
  REQUIRE_CPU();
  expect_error([] { Tensor::ones({6}).contiguous().realize().shard(kFour, 0); },
               "multi axis uneven: self.shape[axis]=6 axis=0 dcount=4");
  Tensor x = Tensor::ones({5, 4}).contiguous().realize().shard(kTwo, 1);
  expect_error(
      [&] {
        x.reshape({10, 2}).shard_axis();
      },
      "reshape (5, 4) -> (10, 2) moved items between shards");
  expect_error([&] { x.reshape({10, 2}).realize(); }, "moved items between shards");
  // a sharded tensor is not sharded again, nor mixed with a one-device one
  expect_error([&] { x.shard(kTwo, 0); }, "can't shard a multi-device tensor");
  Tensor one = Tensor::ones({5, 4}).contiguous().realize();
  expect_error([&] { (x + one).realize(); }, "same device");
}

TEST(Multi, ABroadcastRightAlignsTheSplitAxis) {
  REQUIRE_CPU();
  Tensor a = floats({1, 2, 3, 4}, {4}).shard(kTwo, 0);
  Tensor b = floats({10, 20, 30, 40}, {1, 4}).shard(kTwo, std::nullopt);
  Tensor c = a + b;
  EXPECT_EQ(c.shard_axis(), 1);
  EXPECT_EQ(c.shape(), (Dims{1, 4}));
  EXPECT_EQ(c.data<float>(), (std::vector<float>{11, 22, 33, 44}));
}

// tinygrad's test_allreduce_naive: on 4 devices a sum over the split axis copies each device's
// partial sum to the 3 others (12 copies), then adds on each
TEST(Multi, NaiveAllreduceCopiesEachPartToEachOtherDevice) {
  REQUIRE_CPU();
  Tensor t = Tensor::ones({4, 400}).contiguous().realize().shard(kFour, 0);
  t.realize();
  Tensor s = t.sum({0}).realize();
  EXPECT_EQ(count_names("copy"), 12);
  EXPECT_EQ(s.shard_axis(), std::nullopt);
  EXPECT_EQ(s.devices(), kFour);
  EXPECT_EQ(s.data<float>(), std::vector<float>(400, 4));
}

// The (destination, source) device pairs of the last realize's copies, from their names.
std::vector<std::pair<std::string, std::string>> copy_pairs() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& k : last_kernel_names()) {
    if (k.rfind("copy", 0) != 0) continue;
    const size_t comma = k.find(','), arrow = k.find("<-");
    auto trim = [](std::string v) {
      v.erase(0, v.find_first_not_of(' '));
      v.erase(v.find_last_not_of(' ') + 1);
      return v;
    };
    out.emplace_back(trim(k.substr(comma + 1, arrow - comma - 1)), trim(k.substr(arrow + 2)));
  }
  return out;
}

// tinygrad's test_allreduce: RING=2 reduces each run around the ring and passes it on around it,
// N(N-1) copies each way, between ring neighbours only; ALL2ALL=2 copies each run to the device
// that reduces it and back, 24 copies on 4 devices too
TEST(Multi, RingAndAllToAllAllreduce) {
  REQUIRE_CPU();
  Tensor t = Tensor::ones({4, 400}).contiguous().realize().shard(kFour, 0).realize();
  {
    const ScopedEnv ring("RING", "2");
    Tensor s = t.sum({0}).realize();
    const auto pairs = copy_pairs();
    EXPECT_EQ(pairs.size(), 24u);
    const std::set<std::pair<std::string, std::string>> distinct(pairs.begin(), pairs.end());
    EXPECT_EQ(distinct.size(), 4u);
    for (const auto& [dst, src] : pairs) {
      const int d = dst.back() - '1', from = src.back() - '1';
      EXPECT_EQ(d, (from + 1) % 4) << dst << " <- " << src;
    }
    EXPECT_EQ(s.data<float>(), std::vector<float>(400, 4));
  }
  {
    const ScopedEnv all2all("ALL2ALL", "2");
    Tensor s = (t.sum({0}) * 2).realize();
    EXPECT_EQ(copy_pairs().size(), 24u);
    EXPECT_EQ(s.data<float>(), std::vector<float>(400, 8));
  }
  {  // a max, and a size that the runs do not divide evenly
    const ScopedEnv ring("RING", "2");
    std::vector<float> v(4 * 37);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 101) - 50;
    Tensor m = floats(v, {4, 37}).shard(kFour, 0);
    std::vector<float> want(37, -1e9f);
    for (size_t i = 0; i < v.size(); ++i) want[i % 37] = std::max(want[i % 37], v[i]);
    EXPECT_EQ(m.max({0}).data<float>(), want);
  }
}

// tinygrad's ALLREDUCE_CAST: a half sum accumulates in float32 on each device, and the partial sums
// cross devices as halves (8 bytes for 4 of them), unless ALLREDUCE_CAST=0 (16 bytes, float32)
TEST(Multi, HalfSumsCrossDevicesAsHalves) {
  REQUIRE_CPU();
  std::vector<float> v(16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  Tensor h = Tensor::from_vector(v, {4, 4}, dtypes::float16).to("CPU").shard(kTwo, 0).realize();
  for (const char* cast : {"1", "0"}) {
    const ScopedEnv env("ALLREDUCE_CAST", cast);
    Tensor s = h.sum({0}).realize();
    const auto pairs = copy_pairs();
    ASSERT_EQ(pairs.size(), 2u);
    const std::string bytes = std::string(cast) == "1" ? "8 B," : "16 B,";
    for (const std::string& k : last_kernel_names())
      if (k.rfind("copy", 0) == 0) EXPECT_NE(k.find(bytes), std::string::npos) << k;
    EXPECT_EQ(s.data<float>(), (std::vector<float>{12, 14, 16, 18}));
  }
}

TEST(Multi, EachDeviceHoldsItsShareOfTheMemory) {
  REQUIRE_CPU();
  Tensor big = Tensor::ones({100, 100}).contiguous().realize();
  Tensor split = big.shard(kFour, 0).realize();
  Tensor whole = big.shard(kFour, std::nullopt).realize();
  auto sizes = [](const Tensor& t) {
    std::vector<std::string> devs;
    std::vector<int64_t> n;
    for (const UOp& u : toposort(t.uop()))
      if (u.op() == Op::Buffer) {
        devs.push_back(u.arg().field("device").as_string());
        n.push_back(static_cast<int64_t>(u.arg().field("size").as_int()));
      }
    return std::make_pair(devs, n);
  };
  const auto [sd, sn] = sizes(split);
  EXPECT_EQ(sd, kFour);
  EXPECT_EQ(sn, std::vector<int64_t>(4, 2500));
  const auto [wd, wn] = sizes(whole);
  EXPECT_EQ(wd, kFour);
  EXPECT_EQ(wn, std::vector<int64_t>(4, 10000));
  EXPECT_EQ(split.sum().data<float>(), (std::vector<float>{10000}));
}

TEST(Multi, ShardLikeFollowsTheOtherTensor) {
  REQUIRE_CPU();
  Tensor x = Tensor::ones({256}).contiguous().realize().shard(kTwo, 0);
  Tensor y = Tensor::zeros({256}).contiguous().shard_like(x);
  EXPECT_EQ(y.devices(), kTwo);
  EXPECT_EQ(y.shard_axis(), 0);
  Tensor x2 = Tensor::ones({256}).contiguous().shard(kTwo, std::nullopt);
  Tensor y2 = Tensor::zeros({256}).contiguous().shard_like(x2);
  EXPECT_EQ(y2.shard_axis(), std::nullopt);
  EXPECT_EQ(y2.devices(), kTwo);
  EXPECT_EQ((x + y).data<float>(), std::vector<float>(256, 1));
}

TEST(Multi, MovementOpsOfASplitTensor) {
  REQUIRE_CPU();
  Tensor t = floats({1, 1, 1, 1, 1, 1}, {6}).shard(kTwo, 0);
  EXPECT_EQ(t.reshape({2, 3}).sum({1}).data<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(t.reshape({2, 3}).sum({0}).data<float>(), (std::vector<float>{2, 2, 2}));
  Tensor a = floats({0, 1, 2, 3}, {4}).shard(kTwo, 0);
  // a shrink to one device's block is that block on every device
  EXPECT_EQ(a.shrink({{2, 4}}).data<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(a.shrink({{0, 2}}).data<float>(), (std::vector<float>{0, 1}));
  expect_error([&] { a.shrink({{1, 3}}).realize(); }, "shrinking not supported");
  Tensor m = floats({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4}).shard(kTwo, 1);
  EXPECT_EQ(m.permute({1, 0}).shard_axis(), 0);
  EXPECT_EQ(m.permute({1, 0}).data<float>(), (std::vector<float>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(m.flip({0}).data<float>(), (std::vector<float>{4, 5, 6, 7, 0, 1, 2, 3}));
  EXPECT_EQ(m.pad({{1, 0}, {0, 0}}).data<float>(),
            (std::vector<float>{0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(m.reshape({2, 1, 4}).expand({2, 2, 4}).sum({1}).data<float>(),
            (std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14}));
}

// More of tinygrad's test_multitensor: an arange split and shrunk to each half, a shrink to one
// device's block under elementwise ops and a comparison (test_elementwise_dtype), a sum after +1
TEST(Multi, TinygradsShrinkAndElementwiseCases) {
  REQUIRE_CPU();
  Tensor x = Tensor::arange(4).shard(kTwo, 0).realize();
  EXPECT_EQ(x.shrink({{2, 4}}).data<int32_t>(), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(x.shrink({{0, 2}}).data<int32_t>(), (std::vector<int32_t>{0, 1}));
  std::vector<float> xv(64), wv(64);
  for (size_t i = 0; i < 64; ++i)
    xv[i] = static_cast<float>(i % 7) * 0.5f - 1, wv[i] = static_cast<float>(i % 5) - 2;
  Tensor X = floats(xv, {8, 8}).shard(kFour, 0), W = floats(wv, {8, 8}).shard(kFour, 0);
  Tensor prod = X.shrink({{0, 2}, {0, 8}}) * W.shrink({{0, 2}, {0, 8}});
  Tensor O = prod.lt(Tensor::full({2, 8}, 2));
  std::vector<bool> want;
  for (size_t i = 0; i < 16; ++i) want.push_back(xv[i] * wv[i] < 2);
  EXPECT_EQ(O.data<bool>(), want);
  Tensor ones = Tensor::ones({256}).contiguous().realize().shard(kTwo, 0);
  EXPECT_EQ((ones + 1).sum().data<float>(), (std::vector<float>{512}));
}

TEST(Multi, CopiesToOneDeviceJoinTheParts) {
  REQUIRE_CPU();
  Tensor a = Tensor::from_vector(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {6}, dtypes::int32)
                 .to("CPU")
                 .shard(kTwo, 0);
  Tensor one = a.to("INTERP:1");
  EXPECT_EQ(one.device(), "INTERP:1");
  EXPECT_EQ(one.data<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  Tensor flags = Tensor::from_vector(std::vector<bool>{true, false, true, true}, {4}, dtypes::bool_)
                     .to("CPU")
                     .shard(kTwo, 0);
  EXPECT_EQ(flags.data<bool>(), (std::vector<bool>{true, false, true, true}));
}

// Gradients flow through a split (tinygrad's UNSHARD gradient: the gradient split as the value
// is) and through copies, to a one-device source and to a split tensor itself.
TEST(Multi, GradientsFlowThroughSplitTensors) {
  REQUIRE_CPU();
  Tensor x = floats({1, 2, 3, 4}, {4});
  Tensor xs = x.shard(kTwo, 0);
  std::vector<Tensor> g = (xs * xs).sum().gradient({x});
  EXPECT_EQ(g[0].device(), "CPU");
  EXPECT_EQ(g[0].data<float>(), (std::vector<float>{2, 4, 6, 8}));
  xs.realize();
  std::vector<Tensor> gs = (xs * xs * 3).sum().gradient({xs});
  EXPECT_EQ(gs[0].devices(), kTwo);
  EXPECT_EQ(gs[0].data<float>(), (std::vector<float>{6, 12, 18, 24}));
  // data parallel: the batch split, the weights on every device; the weights' gradient is the
  // sum over the whole batch on each
  Tensor X = floats({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}).shard(kTwo, 0).realize();
  Tensor W = floats({1, 0, 0, 1}, {2, 2}).shard(kTwo, std::nullopt).realize();
  std::vector<Tensor> gw = X.matmul(W).sum().gradient({W});
  EXPECT_EQ(gw[0].devices(), kTwo);
  EXPECT_EQ(gw[0].data<float>(), (std::vector<float>{16, 16, 20, 20}));
}

// Assignment to a tensor on several devices writes each device's buffer its part (tinygrad's
// store_after_multi): a data-parallel SGD step on weights kept whole on every device.
TEST(Multi, AssignmentWritesEachDevicesPart) {
  REQUIRE_CPU();
  Tensor w = floats({1, 2, 3, 4}, {4}).shard(kTwo, 0).realize();
  w.assign(w * 10).realize();
  EXPECT_EQ(w.shard_axis(), 0);
  EXPECT_EQ(w.devices(), kTwo);
  EXPECT_EQ(w.data<float>(), (std::vector<float>{10, 20, 30, 40}));
  // a one-device value is split as the target is
  w.assign(floats({5, 6, 7, 8}, {4})).realize();
  EXPECT_EQ(w.data<float>(), (std::vector<float>{5, 6, 7, 8}));
  // a value split otherwise is refused
  Tensor r = floats({1, 1, 1, 1}, {4}).shard(kTwo, std::nullopt);
  expect_error([&] { w.assign(r); }, "assign sharding mismatch");

  Tensor X = floats({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}).shard(kTwo, 0).realize();
  Tensor W = floats({1, 0, 0, 1}, {2, 2}).shard(kTwo, std::nullopt).realize();
  for (int step = 0; step < 2; ++step) {
    Tensor g = X.matmul(W).sum().gradient({W})[0];
    W.assign(W - g * 0.5f).realize();
  }
  // the gradient's row i is X's column sum i (16, 20) in each column: each step subtracts half
  EXPECT_EQ(W.data<float>(), (std::vector<float>{-15, -16, -20, -19}));
  EXPECT_EQ(W.devices(), kTwo);
  EXPECT_EQ(W.shard_axis(), std::nullopt);
}

// Random programs on split and replicated tensors give the values of the same program on one
// device: elementwise ops between tensors split alike, otherwise or not at all, reductions over
// each axis, permutes, reshapes, pads and shrinks. A program the multi rules refuse must say why
// (tinygrad's messages); any other error, or a wrong value, fails.
TEST(Multi, RandomProgramsMatchOneDevice) {
  REQUIRE_CPU();
  std::mt19937 rng(11);
  auto values = [&](int n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 19) - 9);
    return v;
  };
  const std::vector<std::optional<int>> axes{0, 1, std::nullopt};
  int compared = 0, refused = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const std::vector<float> av = values(24), bv = values(24);
    const std::optional<int> sa = axes[rng() % 3], sb = axes[rng() % 3];
    Tensor a1 = floats(av, {4, 6}), b1 = floats(bv, {4, 6});
    Tensor a = a1.shard(kTwo, sa), b = b1.shard(kTwo, sb);
    std::string program;
    for (int step = 0; step < 3; ++step) {
      switch (rng() % 7) {
        case 0:
          a = a + b, a1 = a1 + b1, program += " +b";
          break;
        case 1:
          a = a * 2 - 1, a1 = a1 * 2 - 1, program += " *2-1";
          break;
        case 2:
          a = a.maximum(b), a1 = a1.maximum(b1), program += " max b";
          break;
        case 3:
          a = (a.permute({1, 0}).contiguous() + 0).permute({1, 0}),
          a1 = (a1.permute({1, 0}).contiguous() + 0).permute({1, 0}), program += " perm";
          break;
        case 4:
          a = a.reshape({2, 2, 6}).sum({1}).reshape({2, 6}).pad({{1, 1}, {0, 0}}),
          a1 = a1.reshape({2, 2, 6}).sum({1}).reshape({2, 6}).pad({{1, 1}, {0, 0}}),
          program += " sum pad";
          break;
        case 5:
          a = a.sum({1}, true).expand({4, 6}) - a, a1 = a1.sum({1}, true).expand({4, 6}) - a1,
          program += " rowsum";
          break;
        default:
          a = a.shrink({{0, 4}, {0, 3}}).pad({{0, 0}, {3, 0}}),
          a1 = a1.shrink({{0, 4}, {0, 3}}).pad({{0, 0}, {3, 0}}), program += " half";
      }
    }
    SCOPED_TRACE(fmt::format("a {} b {}:{}", sa ? std::to_string(*sa) : "none",
                             sb ? std::to_string(*sb) : "none", program));
    std::vector<float> got;
    try {
      got = a.data<float>();
    } catch (const std::exception& e) {
      const std::string m = e.what();
      EXPECT_TRUE(m.find("not supported") != std::string::npos ||
                  m.find("moved items between shards") != std::string::npos)
          << m;
      ++refused;
      continue;
    }
    EXPECT_EQ(got, a1.data<float>());
    ++compared;
  }
  EXPECT_GT(compared, 30);
}

}  // namespace

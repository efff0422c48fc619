// Two processes (mpirun -np 2; runtime/mpi.h): rank 0 owns CPU (CPU:0), rank 1 owns CPU:1. Every
// rank runs the same program; the multi-device rules (rules/multi.rw) decide the copies, and a
// copy between the ranks' devices is an MPI send and receive. The values are the one-process
// ones (tests/tensor/test_multi.cpp has the same cases on one process).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/mpi.h"
#include "tensor/tensor.h"
#include "tests/expect_error.h"

using namespace tinyrw;

namespace {

const std::vector<std::string> kDevs{"CPU", "CPU:1"};

class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (mpi::world().size != 2) GTEST_SKIP() << "run with mpirun -np 2";
  }
};

TEST_F(Mpi, EachRankOwnsItsDevices) {
  const mpi::World& w = mpi::world();
  EXPECT_EQ(w.size, 2);
  EXPECT_EQ(mpi::owner("CPU"), 0);
  EXPECT_EQ(mpi::owner("CPU:1"), 1);
  EXPECT_EQ(mpi::owner("CPU:2"), 0);
  EXPECT_EQ(mpi::is_local(w.rank == 0 ? "CPU" : "CPU:1"), true);
  EXPECT_GE(w.max_tag, 32767);
}

TEST_F(Mpi, ShardedValuesComputeOnTheirRanks) {
  Tensor xs = Tensor::arange(8).shard(kDevs, 0);
  Tensor plus = xs + 1;
  EXPECT_EQ(plus.data<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(plus.shard_axis(), 0);
  EXPECT_EQ(xs.sum().data<int32_t>(), (std::vector<int32_t>{28}));
  // once xs is realized (rank 0 computed device 1's block and sent it, rank 1 received it), each
  // process runs only its own device's kernel
  xs.realize();
  Tensor times = xs * 3;
  times.realize();
  EXPECT_EQ(last_kernel_count(), 1) << "one kernel per rank";
  EXPECT_EQ(times.data<int32_t>(), (std::vector<int32_t>{0, 3, 6, 9, 12, 15, 18, 21}));
}

TEST_F(Mpi, ReductionsOverEveryShardingAreAllreduces) {
  const Tensor m = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  for (const std::optional<int> axis :
       {std::optional<int>(0), std::optional<int>(1), std::optional<int>()}) {
    const Tensor s = m.shard(kDevs, axis);
    EXPECT_EQ(s.sum().data<float>(), (std::vector<float>{10}));
    EXPECT_EQ(s.sum({0}).data<float>(), (std::vector<float>{4, 6}));
    EXPECT_EQ(s.sum({1}).data<float>(), (std::vector<float>{3, 7}));
  }
}

TEST_F(Mpi, EveryAllreduceAlgorithmGivesTheSum) {
  for (const char* algorithm : {"", "RING", "ALL2ALL"}) {
    if (*algorithm != '\0') setenv(algorithm, "2", 1);
    const Tensor t = Tensor::ones({4, 400}).contiguous().shard(kDevs, 0);
    EXPECT_EQ(t.sum({0}).data<float>(), std::vector<float>(400, 4.0f)) << algorithm;
    if (*algorithm != '\0') unsetenv(algorithm);
  }
}

TEST_F(Mpi, ADataParallelStepEqualsTheOneDeviceStep) {
  // linear regression on a batch of 8 split over the ranks: w <- w - 0.1 * d/dw mean((x@w - y)^2)
  std::vector<float> xv(8 * 3), yv(8), wv{0.5f, -0.25f, 1.0f};
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7) % 5) - 2.0f;
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<float>(i % 3);
  Tensor x = Tensor::from_vector(xv, {8, 3}).shard(kDevs, 0).realize();
  Tensor y = Tensor::from_vector(yv, {8, 1}).shard(kDevs, 0).realize();
  Tensor w = Tensor::from_vector(wv, {3, 1}).shard(kDevs, std::nullopt).realize();
  for (int step = 0; step < 3; ++step) {
    Tensor diff = x.matmul(w) - y;
    std::vector<Tensor> g = (diff * diff).mean().gradient({w});
    w.assign(w - g[0] * 0.1f).realize();
    // the same step in doubles
    std::vector<double> grad(3, 0.0);
    for (size_t r = 0; r < 8; ++r) {
      double d = -yv[r];
      for (size_t c = 0; c < 3; ++c) d += xv[r * 3 + c] * wv[c];
      for (size_t c = 0; c < 3; ++c) grad[c] += 2.0 * d * xv[r * 3 + c] / 8.0;
    }
    for (size_t c = 0; c < 3; ++c) wv[c] = static_cast<float>(wv[c] - 0.1 * grad[c]);
    const std::vector<float> got = w.data<float>();
    for (size_t c = 0; c < 3; ++c) EXPECT_NEAR(got[c], wv[c], 1e-5) << "step " << step;
  }
}

TEST_F(Mpi, ACopyBetweenRanksIsOrderedWithAssignments) {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2}, {2}).to("CPU:1").realize();
  Tensor before = a.to("CPU");  // rank 1 sends, rank 0 receives
  a.assign(a * 10);
  Tensor::realize_all({&before, &a});
  Tensor both = before.shard(kDevs, std::nullopt);  // rank 0 sends it back, read on each rank
  EXPECT_EQ(both.data<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(a.shard(kDevs, std::nullopt).data<float>(), (std::vector<float>{10, 20}));
}

TEST_F(Mpi, AnotherRanksBufferIsNotReadHere) {
  Tensor on_one = (Tensor::arange(4).to("CPU:1") + 1).realize();
  if (mpi::world().rank == 1) {
    EXPECT_EQ(on_one.data<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4}));
  } else {
    expect_error([&] { on_one.data<int32_t>(); },
                 "on CPU:1, which MPI rank 1 owns (this is rank 0)");
  }
}

}  // namespace

// runtime/thread_pool.h: every task runs once, at most `width` at once, from several callers at
// once; a task's exception reaches the caller after the other tasks finished.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"

using namespace tinyrw;

TEST(ThreadPool, EveryTaskRunsOnceAndAtMostWidthAtOnce) {
  for (const int64_t width : {1, 2, 4}) {
    std::vector<std::atomic<int>> runs(64);
    std::atomic<int> running{0}, most{0};
    parallel_for(64, width, [&](int64_t i) {
      const int now = ++running;
      for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      ++runs[static_cast<size_t>(i)];
      --running;
    });
    for (const auto& r : runs) EXPECT_EQ(r.load(), 1) << width;
    EXPECT_LE(most.load(), width);
  }
}

TEST(ThreadPool, ATasksExceptionReachesTheCallerAfterTheOthersFinished) {
  std::atomic<int> finished{0};
  EXPECT_THROW(parallel_for(16, 4,
                            [&](int64_t i) {
                              if (i == 3) throw std::runtime_error("task 3");
                              std::this_thread::sleep_for(std::chrono::microseconds(100));
                              ++finished;
                            }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 15);
}

TEST(ThreadPool, CallersOnSeveralThreadsAtOnce) {
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) parallel_for(8, 3, [&](int64_t i) { total += i; });
    });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * (0 + 1 + 2 + 3 + 4 + 5 + 6 + 7));
}

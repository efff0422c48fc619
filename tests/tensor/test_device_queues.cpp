// runtime/device_queues.h: each device's launches run one at a time, devices at once; a launch
// waits for the launches it needs, and a device's independent work goes on meanwhile; the
// caller's launches stay on the calling thread; a failure stops what has not started and reaches
// the caller.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/device_queues.h"

using namespace tinyrw;

namespace {

// Spins until `flag` is set or 20 s pass; whether it was set.
bool await(const std::atomic<bool>& flag) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!flag.load())
    if (std::chrono::steady_clock::now() > end) return false;
  return true;
}

}  // namespace

TEST(DeviceQueues, TwoDevicesRunAtOnce) {
  // each launch waits to see the other device's launch running: only concurrent queues finish
  std::atomic<bool> a_running{false}, b_running{false};
  bool a_saw_b = false, b_saw_a = false;
  std::vector<QueuedLaunch> ls(2);
  ls[0] = {.queue = "CPU:1", .run = [&] {
             a_running = true;
             a_saw_b = await(b_running);
           }};
  ls[1] = {.queue = "CPU:2", .run = [&] {
             b_running = true;
             b_saw_a = await(a_running);
           }};
  std::vector<LaunchState> states;
  run_device_queues(ls, states);
  EXPECT_TRUE(a_saw_b);
  EXPECT_TRUE(b_saw_a);
  EXPECT_EQ(states, (std::vector<LaunchState>(2, LaunchState::Finished)));
}

TEST(DeviceQueues, EachDeviceRunsOneAtATimeAndWaitsForWhatItNeeds) {
  // CPU:1 makes 0 then 2; CPU:2's launch 3 needs 2 (a copy of its result), launch 1 nothing
  std::mutex m;
  std::vector<int> log;
  std::atomic<int> on_cpu1{0}, on_cpu2{0};
  bool overlapped = false;
  auto note = [&](int i) {
    std::atomic<int>& running = i % 2 == 0 ? on_cpu1 : on_cpu2;
    if (++running > 1) overlapped = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(i == 2 ? 20 : 1));
    --running;
    std::lock_guard lock(m);
    log.push_back(i);
  };
  for (int round = 0; round < 20; ++round) {
    log.clear();
    std::vector<QueuedLaunch> ls(4);
    ls[0] = {.queue = "CPU:1", .run = [&] { note(0); }};
    ls[1] = {.queue = "CPU:2", .run = [&] { note(1); }};
    ls[2] = {.queue = "CPU:1", .run = [&] { note(2); }};
    ls[3] = {.queue = "CPU:2", .waits = {2}, .run = [&] { note(3); }};
    std::vector<LaunchState> states;
    run_device_queues(ls, states);
    ASSERT_EQ(log.size(), 4u);
    auto at = [&](int i) { return std::find(log.begin(), log.end(), i) - log.begin(); };
    EXPECT_LT(at(0), at(2));
    EXPECT_LT(at(1), at(3));
    EXPECT_LT(at(2), at(3));
    EXPECT_EQ(log.back(), 3);
  }
  EXPECT_FALSE(overlapped);
}

TEST(DeviceQueues, ADeviceGoesOnWithWorkThatDoesNotWait) {
  // CPU:2's launch 1 needs CPU:1's launch 0, which finishes only once CPU:2's launch 2 (needing
  // nothing) has run: 2 must not wait behind 1
  std::atomic<bool> two_ran{false};
  bool zero_saw_two = false;
  std::vector<int> order;
  std::vector<QueuedLaunch> ls(3);
  ls[0] = {.queue = "CPU:1", .run = [&] { zero_saw_two = await(two_ran); }};
  ls[1] = {.queue = "CPU:2", .waits = {0}, .run = [&] { order.push_back(1); }};
  ls[2] = {.queue = "CPU:2", .run = [&] {
             order.push_back(2);
             two_ran = true;
           }};
  std::vector<LaunchState> states;
  run_device_queues(ls, states);
  EXPECT_TRUE(zero_saw_two);
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
}

TEST(DeviceQueues, CallersLaunchesRunOnTheCallingThread) {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> ran(3);
  std::vector<QueuedLaunch> ls(3);
  ls[0] = {
      .queue = "INTERP:1", .on_caller = true, .run = [&] { ran[0] = std::this_thread::get_id(); }};
  ls[1] = {.queue = "CPU:1", .run = [&] { ran[1] = std::this_thread::get_id(); }};
  ls[2] = {.queue = "INTERP:2", .on_caller = true, .waits = {1}, .run = [&] {
             ran[2] = std::this_thread::get_id();
           }};
  std::vector<LaunchState> states;
  run_device_queues(ls, states);
  EXPECT_EQ(ran[0], caller);
  EXPECT_EQ(ran[2], caller);
  EXPECT_NE(ran[1], std::thread::id());
  // one device alone runs on the caller too: nothing to overlap
  std::vector<QueuedLaunch> one(2);
  for (size_t i = 0; i < 2; ++i)
    one[i] = {.queue = "CPU:1", .run = [&, i] { ran[i] = std::this_thread::get_id(); }};
  run_device_queues(one, states);
  EXPECT_EQ(ran[0], caller);
  EXPECT_EQ(ran[1], caller);
}

TEST(DeviceQueues, AFailureStopsWhatHasNotStartedAndTheEarliestErrorIsRaised) {
  // CPU:1 fails at launch 1; CPU:2's launch 2 waits for it and never starts, nor CPU:1's 3
  std::atomic<bool> other_ran{false};
  std::vector<QueuedLaunch> ls(4);
  ls[0] = {.queue = "CPU:2", .run = [&] { other_ran = true; }};
  ls[1] = {.queue = "CPU:1", .run = [&] {
             (void)await(other_ran);  // (so that launch 0 has surely started)
             throw std::runtime_error("launch 1 failed");
           }};
  ls[2] = {.queue = "CPU:2", .waits = {1}, .run = [] { FAIL() << "ran after a failure"; }};
  ls[3] = {.queue = "CPU:1", .run = [] { FAIL() << "ran after its queue failed"; }};
  std::vector<LaunchState> states;
  try {
    run_device_queues(ls, states);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "launch 1 failed");
  }
  EXPECT_TRUE(other_ran.load());
  EXPECT_EQ(states, (std::vector<LaunchState>{LaunchState::Finished, LaunchState::Failed,
                                              LaunchState::NotStarted, LaunchState::NotStarted}));
  // two failures on two devices: the earlier launch's error is raised
  std::atomic<bool> early_started{false}, late_failed{false};
  std::vector<QueuedLaunch> two(2);
  two[0] = {.queue = "CPU:1", .run = [&] {
              early_started = true;
              (void)await(late_failed);
              throw std::runtime_error("launch 0");
            }};
  two[1] = {.queue = "CPU:2", .run = [&] {
              (void)await(early_started);
              late_failed = true;
              throw std::runtime_error("launch 1");
            }};
  try {
    run_device_queues(two, states);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "launch 0");
  }
  EXPECT_EQ(states, (std::vector<LaunchState>(2, LaunchState::Failed)));
}

TEST(DeviceQueues, AWaitOnALaterLaunchIsRefused) {
  std::vector<QueuedLaunch> ls(2);
  ls[0] = {.queue = "CPU:1", .waits = {1}, .run = [] {}};
  ls[1] = {.queue = "CPU:2", .run = [] {}};
  std::vector<LaunchState> states;
  EXPECT_THROW(run_device_queues(ls, states), std::logic_error);
}

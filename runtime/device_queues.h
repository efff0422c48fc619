// The launches of one schedule on their devices' queues: each device runs its own launches one at
// a time, different devices at once (a thread each). A launch starts once the launches it waits
// for (on any device) have finished; a device runs the earliest of its ready launches, so one
// waiting for another device's result does not hold back its device's independent work.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tinyrw {

struct QueuedLaunch {
  std::string queue;  // the device that runs it
  // Runs it on the calling thread, after the launches before it there: a launch that touches the
  // IR (the interpreter's; the UOp universe is single-threaded, ir/uop.h) must.
  bool on_caller = false;
  std::vector<size_t> waits{};  // earlier launches (indexes) that must have finished
  std::function<void()> run{};
};

enum class LaunchState : char { NotStarted, Finished, Failed };

// Runs `launches`, queues concurrently (with one queue, or one queue and the caller's, nothing
// concurrent starts: all run here in index order). `waits` must name every launch one must
// follow, on its own queue too, and only earlier ones. After a launch throws no other starts; the
// running ones finish, `states` says which ran, and the error of the earliest failed launch (by
// index) is rethrown.
void run_device_queues(const std::vector<QueuedLaunch>& launches, std::vector<LaunchState>& states);

}  // namespace tinyrw

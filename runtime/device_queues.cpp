#include "runtime/device_queues.h"

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

namespace tinyrw {

void run_device_queues(const std::vector<QueuedLaunch>& launches,
                       std::vector<LaunchState>& states) {
  states.assign(launches.size(), LaunchState::NotStarted);
  // the caller's queue first: the calling thread serves queues[0]
  std::vector<std::vector<size_t>> queues(1);
  std::map<std::string, size_t> queue_of;
  for (size_t i = 0; i < launches.size(); ++i) {
    const QueuedLaunch& l = launches[i];
    for (size_t w : l.waits)
      if (w >= i)
        throw std::logic_error("run_device_queues: a launch waits for one that is not before it");
    if (l.on_caller) {
      queues[0].push_back(i);
      continue;
    }
    auto [it, fresh] = queue_of.try_emplace(l.queue, queues.size());
    if (fresh) queues.emplace_back();
    queues[it->second].push_back(i);
  }
  if (queues[0].empty()) queues.erase(queues.begin());
  if (queues.size() <= 1) {  // nothing to overlap: in index order, here
    for (size_t i = 0; i < launches.size(); ++i) {
      states[i] = LaunchState::Failed;
      launches[i].run();
      states[i] = LaunchState::Finished;
    }
    return;
  }

  std::mutex m;
  std::condition_variable changed;
  bool stop = false;
  std::vector<std::exception_ptr> errors(launches.size());
  // the launches each queue may start now (by index), and how many waits each has left
  std::vector<size_t> queue_index(launches.size());
  for (size_t q = 0; q < queues.size(); ++q)
    for (size_t i : queues[q]) queue_index[i] = q;
  std::vector<std::set<size_t>> ready(queues.size());
  std::vector<size_t> pending(launches.size());
  std::vector<std::vector<size_t>> dependents(launches.size());
  for (size_t i = 0; i < launches.size(); ++i) {
    pending[i] = launches[i].waits.size();
    for (size_t w : launches[i].waits) dependents[w].push_back(i);
    if (pending[i] == 0) ready[queue_index[i]].insert(i);
  }
  // Runs queue q's launches, the earliest ready one first, until all ran or one failed anywhere.
  // (The earliest unfinished launch of all waits for earlier ones only, which have finished: it
  // is ready, so some queue can always go on.)
  auto serve = [&](size_t q) {
    for (size_t left = queues[q].size(); left > 0; --left) {
      size_t i;
      {
        std::unique_lock lock(m);
        changed.wait(lock, [&] { return stop || !ready[q].empty(); });
        if (stop) return;
        i = *ready[q].begin();
        ready[q].erase(ready[q].begin());
        states[i] = LaunchState::Failed;  // until it returns
      }
      std::exception_ptr error;
      try {
        launches[i].run();
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard lock(m);
        if (error) {
          errors[i] = error;
          stop = true;
        } else {
          states[i] = LaunchState::Finished;
          for (size_t d : dependents[i])
            if (--pending[d] == 0) ready[queue_index[d]].insert(d);
        }
      }
      changed.notify_all();
      if (error) return;
    }
  };
  std::vector<std::thread> threads;
  try {
    for (size_t q = 1; q < queues.size(); ++q) threads.emplace_back(serve, q);
  } catch (...) {  // a thread the system would not start: nothing more starts
    {
      std::lock_guard lock(m);
      stop = true;
    }
    changed.notify_all();
    for (std::thread& t : threads) t.join();
    throw;
  }
  serve(0);
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tinyrw

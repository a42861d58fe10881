// SPDX-License-Identifier: MIT
// StarvationWatch: the times a worker process was kept off the CPU, recorded in the history as
// faults of kind "starved". Every kWindow it reads how long each thread of each worker waited
// on a run queue (/proc/PID/task/TID/schedstat, its second field); a worker one of whose
// threads waited half the window or more was starved in it. A worker starved that long misses
// its node timeout (100 ms) on every node at once: its acquisitions fail, and what they took on
// the nodes stays there until a ttl ends, so the others are refused too. A run at `nice -n 15`
// beside four busy loops (seed 20261301, 2026-11-29) saw waits fail this way with no injected
// fault running; the checker's liveness rule (c) excuses a wait that lost a tenth of itself to
// starvation (history.h). The runner's own wake-ups are no measure: a sleeping thread is
// woken promptly at any priority, while the workers' busy threads wait.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlock::chaos {

class StarvationWatch {
 public:
  static constexpr std::chrono::milliseconds kWindow{100};

  // Watches `workers` (worker i + 1 is workers[i]: its holders are named "...-(i + 1)" or
  // "async-(i + 1).k") and hands each starved period's history line (its target
  // starved_target(i + 1)) to `record`, from a thread of its own.
  StarvationWatch(std::vector<pid_t> workers, std::function<void(const std::string&)> record);
  ~StarvationWatch();  // stops, records the periods still open, and joins
  StarvationWatch(const StarvationWatch&) = delete;
  StarvationWatch& operator=(const StarvationWatch&) = delete;

 private:
  void run();
  // For each worker: the most any of its threads waited on a run queue since the last look.
  std::vector<std::int64_t> waited_since_last();

  const std::vector<pid_t> workers_;
  const std::function<void(const std::string&)> record_;
  std::map<std::pair<pid_t, std::string>, std::int64_t> run_delay_;  // (pid, tid): ns so far
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace dlock::chaos

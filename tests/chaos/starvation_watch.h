// SPDX-License-Identifier: MIT
// StarvationWatch: the times the runner itself was kept off the CPU, recorded in the history as
// faults of kind "starved". A thread of the controller (which runs at the workers' priority)
// sleeps kTick at a time; a wake-up later than kLate means every process of the run may have
// been held up as long, and a worker held up that long misses its node timeout (100 ms) on
// every node at once: its acquisitions fail, and what they took on the nodes stays until a ttl
// ends. A run at `nice -n 15` beside two busy loops saw every acquisition of chaos:counter fail
// for 8 minutes (seed 20261224, 2026-11-29): no lock can be had by a client that cannot run,
// and the checker's liveness rule (c) excuses a wait that lost a tenth of itself this way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace dlock::chaos {

class StarvationWatch {
 public:
  static constexpr std::chrono::milliseconds kTick{10};
  static constexpr std::chrono::milliseconds kLate{50};

  // Hands each starved period's history line to `record`, from a thread of its own.
  explicit StarvationWatch(std::function<void(const std::string&)> record);
  ~StarvationWatch();  // stops and joins
  StarvationWatch(const StarvationWatch&) = delete;
  StarvationWatch& operator=(const StarvationWatch&) = delete;

  std::size_t periods() const;  // starved periods recorded so far

 private:
  void run();

  const std::function<void(const std::string&)> record_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;        // guarded by mu_
  std::size_t periods_ = 0;  // guarded by mu_
  std::thread thread_;
};

}  // namespace dlock::chaos

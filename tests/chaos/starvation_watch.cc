// SPDX-License-Identifier: MIT
#include "starvation_watch.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "history.h"
#include "worker.h"

namespace dlock::chaos {

StarvationWatch::StarvationWatch(std::vector<pid_t> workers,
                                 std::function<void(const std::string&)> record)
    : workers_(std::move(workers)), record_(std::move(record)) {
  (void)waited_since_last();  // the baseline
  thread_ = std::thread([this] { run(); });
}

StarvationWatch::~StarvationWatch() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<std::int64_t> StarvationWatch::waited_since_last() {
  std::vector<std::int64_t> most(workers_.size(), 0);
  for (std::size_t w = 0; w < workers_.size(); ++w) {
    const auto dir = std::filesystem::path("/proc") / std::to_string(workers_[w]) / "task";
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator(dir, ec)) {
      std::ifstream in(task.path() / "schedstat");
      std::int64_t on_cpu = 0;
      std::int64_t waited = 0;
      if (!(in >> on_cpu >> waited)) continue;
      // A thread seen for the first time only sets its baseline.
      const auto [it, first] =
          run_delay_.try_emplace({workers_[w], task.path().filename().string()}, waited);
      if (!first) most[w] = std::max(most[w], waited - it->second);
      it->second = waited;
    }
  }
  return most;
}

void StarvationWatch::run() {
  constexpr std::int64_t kStarvedNs = std::chrono::nanoseconds(kWindow).count() / 2;
  std::vector<std::int64_t> open(workers_.size(), 0);  // start of a starved period, or 0
  std::unique_lock lock(mu_);
  for (bool stopping = false; !stopping;) {
    const std::int64_t from = real_now_ns();
    stopping = cv_.wait_for(lock, kWindow, [this] { return stop_; });
    lock.unlock();
    const auto waited = waited_since_last();
    for (std::size_t w = 0; w < workers_.size(); ++w) {
      const bool starved = !stopping && waited[w] >= kStarvedNs;
      if (starved && open[w] == 0) open[w] = from;
      if (!starved && open[w] != 0) {
        record_(to_line(Fault{kStarved, "pid " + std::to_string(workers_[w]), open[w], from}));
        open[w] = 0;
      }
    }
    lock.lock();
  }
}

}  // namespace dlock::chaos

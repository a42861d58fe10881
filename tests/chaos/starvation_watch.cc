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
    // error_code forms only: a worker (or a thread) that ended meanwhile is skipped, never an
    // exception out of this thread.
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::ifstream in(it->path() / "schedstat");
      std::int64_t on_cpu = 0;
      std::int64_t waited = 0;
      if (!(in >> on_cpu >> waited)) continue;
      // A thread seen for the first time only sets its baseline.
      const auto [known, first] =
          run_delay_.try_emplace({workers_[w], it->path().filename().string()}, waited);
      if (!first) most[w] = std::max(most[w], waited - known->second);
      known->second = waited;
    }
  }
  return most;
}

void StarvationWatch::run() {
  std::vector<std::int64_t> open(workers_.size(), 0);  // start of a starved period, or 0
  std::unique_lock lock(mu_);
  for (bool stopping = false; !stopping;) {
    const std::int64_t from = real_now_ns();
    stopping = cv_.wait_for(lock, kWindow, [this] { return stop_; });
    lock.unlock();
    const auto waited = waited_since_last();
    // Half of the time that passed (this thread may itself have woken late), not of kWindow.
    const std::int64_t half = (real_now_ns() - from) / 2;
    for (std::size_t w = 0; w < workers_.size(); ++w) {
      const bool starved = !stopping && waited[w] >= half;
      if (starved && open[w] == 0) open[w] = from;
      if (!starved && open[w] != 0) {
        record_(to_line(Fault{kStarved, starved_target(static_cast<int>(w) + 1), open[w], from}));
        open[w] = 0;
      }
    }
    lock.lock();
  }
}

}  // namespace dlock::chaos

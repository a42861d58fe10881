// SPDX-License-Identifier: MIT
#include "starvation_watch.h"

#include <utility>

#include "history.h"
#include "worker.h"

namespace dlock::chaos {

StarvationWatch::StarvationWatch(std::function<void(const std::string&)> record)
    : record_(std::move(record)) {
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

std::size_t StarvationWatch::periods() const {
  std::lock_guard lock(mu_);
  return periods_;
}

void StarvationWatch::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    // The history's clock (real time, as every event's), and the wake-up it was due at.
    const std::int64_t due = real_now_ns() + std::chrono::nanoseconds(kTick).count();
    if (cv_.wait_for(lock, kTick, [this] { return stop_; })) return;
    const std::int64_t woke = real_now_ns();
    if (woke - due < std::chrono::nanoseconds(kLate).count()) continue;
    ++periods_;
    lock.unlock();
    record_(to_line(Fault{"starved", "runner", due, woke}));
    lock.lock();
  }
}

}  // namespace dlock::chaos

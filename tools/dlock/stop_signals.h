// SPDX-License-Identifier: MIT
// StopSignals: SIGINT/SIGTERM (and SIGHUP) turned into something a loop can wait for. Create it
// before any thread starts: threads inherit the blocked mask, so the signals reach only the
// thread that waits.
#pragma once

#include <signal.h>

#include <chrono>
#include <ctime>

namespace dlock::cli {

class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~StopSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Waits up to `limit`; returns the signal number, or 0 if none came.
  int wait_for(std::chrono::milliseconds limit) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    const int sig = sigtimedwait(&set_, nullptr, &ts);
    return sig > 0 ? sig : 0;
  }

 private:
  sigset_t set_{};
  sigset_t old_{};
};

}  // namespace dlock::cli

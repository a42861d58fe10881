// SPDX-License-Identifier: MIT
// StopSignals: SIGINT/SIGTERM (and SIGHUP) turned into something a loop can wait for. Create it
// before any thread starts: threads inherit the blocked mask, so the signals reach only the
// thread that waits. For as long as it lives, the threads its thread starts are born with the
// stop signals blocked: `dlock run` starts its reaper thread in one's scope (run_command.cc).
#pragma once

#include <signal.h>

#include <chrono>
#include <ctime>

namespace dlock::cli {

// The signals that ask the tool to stop: those StopSignals blocks and waits for, and those
// `dlock run` forwards to its command.
inline constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    for (int sig : kStopSignals) sigaddset(&set_, sig);
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

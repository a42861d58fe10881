// SPDX-License-Identifier: MIT
#include "sim/sim_clock.h"

#include <time.h>

#include <stdexcept>
#include <thread>

#include "lock/hand_off.h"

namespace dlock::sim {
namespace {

// The installed clock's time, or nullptr: the real clock.
thread_local SimClock::Clock::time_point* t_now = nullptr;

}  // namespace

SimClock::SimClock(Clock::time_point start) : now_(start) {
  if (t_now) throw std::logic_error("a SimClock is installed on this thread already");
  t_now = &now_;
  // HandOff (in the library) keeps Clock::now() plus a grace of at least 3 ms and hands it
  // back: read through libstdc++'s clock it would be the real time, days away from kStart.
  lock::HandOff probe;
  probe.released("sim-clock-probe", Clock::duration::zero());
  const auto until = probe.hold_back_until("sim-clock-probe");
  if (!until || *until != now_ + lock::HandOff::grace(Clock::duration::zero())) {
    t_now = nullptr;
    throw std::logic_error(
        "the library does not read the simulated clock: sim_test's steady_clock::now() "
        "(tests/sim/sim_clock.cc) is not the one libdlock calls");
  }
}

SimClock::~SimClock() {
  t_now = nullptr;
}

void sleep_for(SimClock::Clock::duration d) {
  if (t_now) {
    *t_now += d;
  } else {
    std::this_thread::sleep_for(d);
  }
}

}  // namespace dlock::sim

// libstdc++'s steady_clock::now(), replaced for the whole process (sim_clock.h says why). The
// real clock is what libstdc++ reads: CLOCK_MONOTONIC.
std::chrono::steady_clock::time_point std::chrono::steady_clock::now() noexcept {
  if (dlock::sim::t_now) return *dlock::sim::t_now;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

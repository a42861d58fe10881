// SPDX-License-Identifier: MIT
// SimClock: a schedule's own time. A schedule used to run in real time and spent nearly all of
// it asleep: 40-60 steps with pauses of 0-6 ms, idle steps of 15-70 ms and slow replies of
// 2-30 ms, which made about 0.4 s, for a few milliseconds of work by the model, the client code
// and the checker (docs/simulation.md, "How long a schedule takes").
//
// The library reads std::chrono::steady_clock::now() wherever it needs the time (validity,
// quarantines, announcements), and takes no clock as a parameter. So sim_test defines
// steady_clock::now() itself (sim_clock.cc). The executable's definition comes before
// libstdc++'s for every caller in the process: libdlock.so's calls bind to it by ELF symbol
// interposition, and with the static library (the sanitizer builds) the linker picks it first.
// On a thread with a SimClock installed it reads that clock; on any other thread the monotonic
// clock, as libstdc++'s does. Installing a SimClock checks that the library sees it, so a build
// where the interposition failed (libstdc++ linked statically into the library, say) stops at
// the first schedule instead of running schedules in two times at once.
//
// Time then moves only when the schedule sleeps (sim::sleep_for), by exactly the time slept: a
// step's own work takes none. A seed's schedule is the same on a busy machine as on an idle
// one, and replays exactly. The schedules' steps, faults and sleeps are the seed's as before.
#pragma once

#include <chrono>

namespace dlock::sim {

class SimClock {
 public:
  using Clock = std::chrono::steady_clock;
  // Where every schedule starts: about 11.6 days, as on a machine that has been up a while
  // (the library's "long ago" defaults, time_point{} and min(), stay long ago).
  static constexpr Clock::time_point kStart{std::chrono::seconds(1'000'000)};

  // Installs a simulated clock reading `start` on this thread (one at a time); throws
  // std::logic_error if the library reads another clock.
  explicit SimClock(Clock::time_point start = kStart);
  // The thread reads the real clock again.
  ~SimClock();
  SimClock(const SimClock&) = delete;
  SimClock& operator=(const SimClock&) = delete;

 private:
  Clock::time_point now_;
};

// Advances this thread's SimClock by `d` (the random schedules, and the directed ones of
// sim_directed_test.cc, each install one), or, on a thread without one, sleeps for `d`.
void sleep_for(SimClock::Clock::duration d);

}  // namespace dlock::sim

// SPDX-License-Identifier: MIT
// HandOff: the default (non-fair) mode's guard against barging. A client that releases a lock
// while others wait for it, and asks for it again at once (a worker loop), would win almost
// every time: its attempt is under way before the waiters have even heard of the release. So
// after such a release, lock() on that name first waits a short grace, and a waiter takes the
// lock meanwhile. try_lock() is not held back, and nothing is held back when nobody else was
// listening. Fair mode needs none of this: its queue decides.
//
// The grace is not cut short by another owner's release. It used to be, and the chaos runner
// then saw two workers pass the lock back and forth for seconds while two others waited: the
// previous holder, idle in its grace, heard the next release as early as any waiter and was
// ready at once, while the waiters were still finishing the attempt they had just lost to the
// current holder, so it won nearly every second hand-off. The cost: a lock freed during the
// grace by someone else stays free for the rest of it if nobody else wants it (at most 30 ms).
//
// The grace is 8 release round trips, between 3 ms and 30 ms: a hand-off takes about three
// round trips (publish, wake, acquire), plus waking a thread or two in another process, which
// on a busy machine can take a millisecond or two. A waiter that died costs the releaser one
// grace.
//
// Thread-safety: all members may be called from any thread.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace dlock::lock {

class HandOff {
 public:
  using Clock = std::chrono::steady_clock;

  // `name` was freed while others were listening; the release took `round_trip`.
  void released(const std::string& name, Clock::duration round_trip);
  // Until when lock() should let waiters go first on `name`; nullopt: no need.
  std::optional<Clock::time_point> hold_back_until(const std::string& name);

  static Clock::duration grace(Clock::duration round_trip);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, Clock::time_point> until_;  // guarded by mu_
};

}  // namespace dlock::lock

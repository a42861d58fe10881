// SPDX-License-Identifier: MIT
// Watchdog: the client's table of held leases and the one thread that renews them.
//
// Every tick renews all auto-renewed leases: one pipelined round per node for up to 4,096 of
// them (renew.lua, in chunks), not one round trip per lock. The tick period is the smallest
// renew interval in use (ttl/3 by default); a lease whose renewal missed the quorum is retried
// sooner while its validity lasts, and declared lost when it runs out: its status turns lost
// and its on_lost callback runs on this thread. A renewal that finds the hold gone from a
// quorum loses the hold, and with it every lease that shares it (reentrant leases). Renewal of a
// lease stops when it is released, when its owning thread exited without releasing it, and with the
// process.
//
// Thread-safety: all public members may be called from any thread. Lock order: the table's
// mutex before a lease's mutex; never call in here while holding a lease's mutex.
#pragma once

#include <dlock/observer.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lock/lease_state.h"
#include "lock/quorum_lock.h"

namespace dlock::lock {

class Watchdog {
 public:
  // `observer` (may be null) hears of every renewal and lost lock.
  explicit Watchdog(QuorumLock& lock, Observer* observer = nullptr)
      : lock_(lock), observer_(observer) {}
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Remembers a new lease (renewed if state->auto_renew). Starts the thread on first use.
  void track(const std::shared_ptr<detail::LeaseState>& state);
  // How many leases are tracked (for tests).
  std::size_t tracked();

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  // Renews what is due; returns when the next tick is needed.
  Clock::time_point tick();

  void prune_locked();

  QuorumLock& lock_;
  Observer* const observer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::weak_ptr<detail::LeaseState>> leases_;   // guarded by mu_
  std::size_t prune_at_ = 1024;                             // guarded by mu_
  Clock::time_point next_tick_ = Clock::time_point::max();  // guarded by mu_
  bool stop_ = false;                                       // guarded by mu_
  std::thread thread_;                                      // started under mu_
};

}  // namespace dlock::lock

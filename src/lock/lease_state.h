// SPDX-License-Identifier: MIT
// LeaseState: what a Lease handle and the watchdog share about one held lease.
#pragma once

#include <dlock/result.h>
#include <dlock/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "lock/hold.h"

namespace dlock::detail {

struct LeaseState {
  using Clock = std::chrono::steady_clock;
  enum class Status { held, released, lost };

  // Immutable after construction.
  std::shared_ptr<lock::Hold> hold;  // shared with the reentrant leases of the same owner
  std::chrono::milliseconds ttl{0};
  Clock::time_point acquired_at;  // set before the lease is shared: for the observer
  bool auto_renew = false;
  std::chrono::milliseconds renew_every{0};
  std::function<void(const Error&)> on_lost;
  // For thread-bound owners: false once the owning thread has exited (renewal then stops).
  std::shared_ptr<const std::atomic<bool>> thread_alive;

  mutable std::mutex mu;
  Clock::time_point valid_until;  // guarded by mu
  Status status = Status::held;   // guarded by mu
  Clock::time_point renewed_at;   // guarded by mu: when the last renewal round started
  // Guarded by mu: why the unlock() that ended this lease did not release it. A later unlock()
  // reports it again, never a release that did not happen (the key lives until its ttl).
  std::optional<Error> unlock_failed;

  const std::string& name() const { return hold->id.name; }
  const OwnerToken& owner() const { return hold->id.owner; }

  // Held, and ours for some time yet: not released, not lost (also not with its hold).
  bool held_now() const {
    std::lock_guard lock(mu);
    return status == Status::held && !hold->lost.load() && Clock::now() < valid_until;
  }
};

// A flag that turns false when the calling thread exits: how the watchdog learns that a thread
// holding a lock died without releasing it.
std::shared_ptr<const std::atomic<bool>> this_thread_alive();

}  // namespace dlock::detail

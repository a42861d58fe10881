// SPDX-License-Identifier: MIT
// dlock/semaphore.h: Semaphore, N permits per name across processes and machines, each permit
// a lease: renewed by the watchdog, given back on release, on the holder's death after its
// ttl, or by an operator (dlock release --force --permits N); never leaked.
//
//   dlock::Semaphore downloads(client, "downloads", 4);     // at most 4 at once, everywhere
//   auto permit = downloads.acquire_lease(std::chrono::seconds(30));
//   if (!permit) return fail(permit.error());               // errc::wait_timeout, ...
//   fetch(permit->fencing_token());                         // a token per permit
//   // the permit goes back when `permit` is destroyed or unlocked
//
//   if (downloads.try_acquire_for(std::chrono::seconds(30))) {  // std::counting_semaphore's
//     ...                                                          // names, dlock's Results
//     (void)downloads.release();
//   }
//
// How: a semaphore of N permits is N slots, each an ordinary dlock lock named
// "dlock:sem:{NAME}:<i>". A permit is one slot held on a quorum of nodes, so there are at most
// N holders by the mutex's own argument, on 1 node and on N nodes (counting permits on each
// node cannot do this: see docs/features.md, "Semaphore"). Every permit is an ordinary Lease:
// its fencing token grows with every holder of its slot, the restart quarantine applies, and a
// lost permit is reported as a lost lock (LockOptions::on_lost).
//
// Acquiring tries the slots one at a time, from a random one (so contenders spread), and
// waits by pub/sub: every slot publishes its release on the semaphore's one channel. A full
// try costs up to N quorum rounds.
//
// One count per semaphore: the first acquisition records `permits` on the nodes, and while any
// permit is held an acquisition that names another count is refused (errc::invalid_argument,
// naming both); the record goes with the last permit. Client::resize_semaphore changes it.
//
// Not reentrant: every acquisition takes one more permit, under an owner of its own
// (LockOptions::owner is refused with errc::invalid_argument: a semaphore has many holders).
// Fair (LockOptions::fair): waiters queue once for the whole semaphore and get permits in
// arrival order, whichever slot is given back; as for the mutex, non-fair takers on the same
// semaphore do not queue.
//
// Errors are values, as everywhere in dlock's API: every call returns a Result (errc::lock_held
// when every permit is taken, errc::wait_timeout, errc::cancelled, errc::quorum_not_reached,
// errc::invalid_argument for a bad name, permit count or option, or a count other than the one
// the nodes recorded). Nothing throws.
//
// Thread-safety: one Semaphore may be shared by any number of threads. The std-style calls
// keep their permits in the Semaphore (release() gives back the one taken last, whichever
// thread took it); destroying the Semaphore gives back what it still holds.
#pragma once

#include <dlock/client.h>
#include <dlock/lease.h>
#include <dlock/options.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

class Semaphore {
 public:
  // The most permits a semaphore may have: a full try costs one round per permit.
  static constexpr std::size_t kMaxPermits = 1024;

  Semaphore(Client client, std::string name, std::size_t permits, LockOptions options = {});
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  // One pass over the permits.
  Result<Lease> try_acquire_lease();
  // Waits up to `wait` for a permit; a stop request ends the wait with errc::cancelled.
  Result<Lease> acquire_lease(Millis wait, std::stop_token stop = {});

  // std::counting_semaphore's names, with Results: the permit is kept in this object.
  // acquire() waits however long it takes (errors: as acquire_lease, never wait_timeout);
  // try_acquire() is one pass (errc::lock_held: every permit is taken); try_acquire_for and
  // try_acquire_until wait (errc::wait_timeout). `if (s.try_acquire())` reads as in std.
  Result<void> acquire();
  Result<void> try_acquire();
  template <typename Rep, typename Period>
  Result<void> try_acquire_for(const std::chrono::duration<Rep, Period>& wait) {
    return acquire_within(Millis(wait));
  }
  template <typename Clock, typename Duration>
  Result<void> try_acquire_until(const std::chrono::time_point<Clock, Duration>& until) {
    const auto now = Clock::now();
    return acquire_within(until <= now ? Millis() : Millis(until - now));
  }
  // Gives back the permit taken last by acquire()/try_acquire*, whichever thread took it.
  // Errors: not_owner when this Semaphore holds none; as Lease::unlock (lock_lost: the permit
  // had expired or was taken over; its key is gone or expires within its ttl anyway).
  Result<void> release();
  // Permits held through acquire()/try_acquire*.
  std::size_t held() const;

  std::size_t max() const noexcept { return permits_; }
  const std::string& name() const noexcept { return name_; }
  // The lock name of slot i ("dlock:sem:{NAME}:<i>"): for status and force release.
  std::string slot_name(std::size_t i) const;
  // The same for the semaphore `name`, without a Semaphore: to extend or release a permit
  // handed over with Lease::detach (Client::extend / Client::unlock on its slot, by owner).
  static std::string slot_name(std::string_view name, std::size_t i);

 private:
  Result<void> acquire_within(std::chrono::milliseconds wait);
  // Keeps a permit in held_.
  Result<void> keep(Result<Lease> lease);

  Client client_;
  const std::string name_;
  const std::size_t permits_;
  const LockOptions options_;
  mutable std::mutex mu_;
  std::vector<Lease> held_;  // guarded by mu_
};

}  // namespace dlock

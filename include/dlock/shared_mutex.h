// SPDX-License-Identifier: MIT
// dlock/shared_mutex.h: SharedMutex, a distributed read-write lock that meets the standard
// Lockable, TimedLockable, SharedLockable and SharedTimedLockable requirements, so
// std::unique_lock, std::shared_lock and their try_lock_for / try_lock_until work.
//
//   dlock::SharedMutex catalog(client, "catalog");
//   {
//     std::shared_lock reading(catalog);    // many readers at once, on every machine
//     serve(catalog.shared_lease()->fencing_token());
//   }
//   {
//     std::unique_lock writing(catalog);    // one writer, no reader beside it
//     rebuild(catalog.lease()->fencing_token());
//   }
//
// The write side is the same lock as Mutex and Client::lock on that name; the read side is
// Client::lock_shared. The rules (docs/features.md, "Read-write lock"):
// - many readers or one writer, on 1 node and on N (a reader and a writer each need a quorum,
//   the two quorums share a node, and that node's script admits only one kind);
// - a writer that waits keeps new readers out until it has had the lock (no writer
//   starvation); readers already in keep their lease;
// - each reader's lease has its own ttl and expires alone (a dead reader frees the lock for
//   writers after its ttl, the others keep reading);
// - one fencing counter for both kinds: a writer's token is larger than the token of every
//   reader and writer that held the lock before it;
// - reentrancy: a thread may lock again what it holds (each kind counts its own leases). A
//   thread that holds the write lock may also take the read lock (a downgrade: take the read
//   lock, then unlock the write lock). A thread that holds the read lock may not take the
//   write lock: lock() and the try_ functions throw dlock::Exception (errc::invalid_argument)
//   rather than wait for themselves forever;
// - fair mode (LockOptions::fair) orders writers only: here it applies to the write side
//   (Client::lock_shared refuses it).
//
// Errors as Mutex: lock(), lock_shared() and the try_ functions throw dlock::Exception for
// anything but contention; unlock() and unlock_shared() never throw (a failed release goes to
// on_unlock_error, if given).
//
// Thread-safety: one SharedMutex may be shared by any number of threads; each thread is its own
// owner, as for Mutex (see mutex.h for thread pools and coroutines).
#pragma once

#include <dlock/client.h>
#include <dlock/lease.h>
#include <dlock/options.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dlock {

class SharedMutex {
 public:
  // options.owner is ignored (each thread owns); options.fair applies to the write side only.
  SharedMutex(Client client, std::string name, LockOptions options = {},
              std::function<void(const Error&)> on_unlock_error = {});
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  // The write (exclusive) side.
  void lock();
  bool try_lock();
  template <typename Rep, typename Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return lock_within(Millis(wait), Side::write);
  }
  template <typename Clock, typename Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until) {
    return lock_within(until_from_now(until), Side::write);
  }
  void unlock() noexcept;

  // The read (shared) side.
  void lock_shared();
  bool try_lock_shared();
  template <typename Rep, typename Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& wait) {
    return lock_within(Millis(wait), Side::read);
  }
  template <typename Clock, typename Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& until) {
    return lock_within(until_from_now(until), Side::read);
  }
  void unlock_shared() noexcept;

  // The calling thread's most recent write / read hold, or nullptr.
  const Lease* lease() const;
  const Lease* shared_lease() const;
  const std::string& name() const noexcept { return name_; }

 private:
  enum class Side { write, read };
  template <typename Clock, typename Duration>
  static std::chrono::milliseconds until_from_now(
      const std::chrono::time_point<Clock, Duration>& until) {
    const auto now = Clock::now();
    return until <= now ? Millis() : Millis(until - now);  // no min() - now overflow
  }
  bool lock_within(std::chrono::milliseconds wait, Side side);
  bool try_once(Side side);
  bool keep_or_throw(Result<Lease> lease, Side side);
  void release(Side side) noexcept;
  const Lease* latest(Side side) const;

  Client client_;
  const std::string name_;
  LockOptions options_;
  const std::function<void(const Error&)> on_unlock_error_;
  mutable std::mutex mu_;
  // Per side, per thread, its leases in the order taken; guarded by mu_.
  std::unordered_map<std::thread::id, std::vector<Lease>> held_[2];
};

}  // namespace dlock

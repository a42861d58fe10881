// SPDX-License-Identifier: MIT
// dlock/mutex.h: Mutex, a distributed lock that meets the standard Lockable and TimedLockable
// requirements, so std::unique_lock, std::scoped_lock, try_lock_for and try_lock_until work.
//
//   dlock::Mutex inventory(client, "inventory");
//   {
//     std::scoped_lock guard(inventory);          // waits (by pub/sub) until it has the lock
//     update(inventory.lease()->fencing_token());  // released on scope exit, exceptions too
//   }
//   std::unique_lock guard(inventory, std::defer_lock);
//   if (guard.try_lock_for(std::chrono::seconds(2))) { ... }
//
// Each thread is its own owner (the default owner), and the same thread may lock again
// (reentrancy). The lock is renewed by the watchdog unless options.auto_renew is false.
// The standard interface has no error channel, so: lock() and the try_ functions throw
// dlock::Exception for anything but contention (no quorum, bad name, ...), and return false /
// keep waiting on contention; unlock() never throws (a failed release is reported to
// the constructor's on_unlock_error, if given; the keys expire within the ttl in any case).
//
// Thread-safety: one Mutex may be shared by any number of threads. Its owners are threads, so it
// is for code that runs on its own threads: a task on a thread pool or a coroutine that may
// resume elsewhere must not hold it across a suspension (unlock() on another thread finds no
// hold of that thread), and two tasks on one pool thread are one owner. Use Client with a
// named owner, or dlock/async.h, there.
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

class Mutex {
 public:
  // options.owner is ignored: a Mutex excludes threads from each other, so each thread owns.
  // on_unlock_error, if given, is called (on the unlocking thread) with the error when unlock()
  // could not release on a quorum; it is fixed here, so no thread can race to change it.
  Mutex(Client client, std::string name, LockOptions options = {},
        std::function<void(const Error&)> on_unlock_error = {});
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock();
  bool try_lock();
  template <typename Rep, typename Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return lock_within(Millis(wait));
  }
  template <typename Clock, typename Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until) {
    const auto now = Clock::now();
    return lock_within(until <= now ? Millis() : Millis(until - now));  // no min() - now overflow
  }
  // Gives back the calling thread's most recent hold. Never throws.
  void unlock() noexcept;

  // The calling thread's most recent hold (fencing token, validity), or nullptr.
  const Lease* lease() const;
  const std::string& name() const noexcept { return name_; }

 private:
  bool lock_within(std::chrono::milliseconds wait);
  void keep(Lease lease);

  Client client_;
  const std::string name_;
  LockOptions options_;
  const std::function<void(const Error&)> on_unlock_error_;
  mutable std::mutex mu_;
  std::unordered_map<std::thread::id, std::vector<Lease>> held_;  // guarded by mu_
};

}  // namespace dlock

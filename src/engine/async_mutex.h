// SPDX-License-Identifier: MIT
// AsyncMutex: mutual exclusion between Tasks across suspension points (a node round trip), for
// what must stay serialized while a round is in flight: the acquisitions and releases of one
// (name, owner) in Holds, the greetings of Membership. A waiting Task suspends instead of
// blocking its thread, so the io thread never blocks on it.
//
// Ownership passes straight to the first waiter on unlock; the waiter resumes on the io thread
// (through `post`), never inside unlock(): the unlocking Task goes on without running another.
#pragma once

#include <atomic>
#include <cassert>
#include <coroutine>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <utility>

namespace dlock::engine {

class AsyncMutex {
 public:
  using Post = std::function<void(std::function<void()>)>;
  explicit AsyncMutex(Post post) : post_(std::move(post)) {}
  AsyncMutex(const AsyncMutex&) = delete;
  AsyncMutex& operator=(const AsyncMutex&) = delete;

  // Releases the mutex when destroyed (moved-from: nothing).
  class Guard {
   public:
    explicit Guard(AsyncMutex* m) : m_(m) {}
    Guard(Guard&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
    Guard& operator=(Guard&&) = delete;
    ~Guard() {
      if (m_) m_->unlock();
    }

   private:
    AsyncMutex* m_;
  };

  // co_await mutex.lock() -> Guard
  class Locking {
   public:
    explicit Locking(AsyncMutex& m) : m_(m) {}
    bool await_ready() { return m_.try_lock(); }
    bool await_suspend(std::coroutine_handle<> h) {
      std::lock_guard lock(m_.mu_);
      // Held: mark that it has a waiter (unlock() then takes mu_ to hand it over), unless it
      // was released meanwhile, then take it.
      int seen = m_.state_.load();
      for (;;) {
        if (seen == kFree) {
          if (m_.state_.compare_exchange_weak(seen, kLocked, std::memory_order_acquire)) {
            return false;
          }
        } else if (seen == kWaitedFor || m_.state_.compare_exchange_weak(seen, kWaitedFor)) {
          break;
        }
      }
      m_.waiters_.push_back(h);
      return true;
    }
    Guard await_resume() { return Guard(&m_); }

   private:
    AsyncMutex& m_;
  };
  Locking lock() { return Locking(*this); }
  // The mutex at once if it is free (empty if not): for a fast path that needs no Task.
  std::optional<Guard> try_lock_now() {
    if (!try_lock()) return std::nullopt;
    return std::optional<Guard>(std::in_place, this);
  }

 private:
  // state_: free, held, or held with waiters (in waiters_, under mu_). Taking a free mutex and
  // releasing one nobody waits for are one atomic operation each, no lock: the uncontended
  // case of every lock cycle, which takes two of these mutexes (issue 32).
  static constexpr int kFree = 0;
  static constexpr int kLocked = 1;
  static constexpr int kWaitedFor = 2;

  bool try_lock() {
    int expected = kFree;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire);
  }
  void unlock() {
    int expected = kLocked;
    if (state_.compare_exchange_strong(expected, kFree, std::memory_order_release)) return;
    std::coroutine_handle<> next;
    {
      std::lock_guard lock(mu_);
      // Not free (a second unlock): the CAS above failed because kWaitedFor means waiters.
      assert(!waiters_.empty());
      // Handed to the first waiter: it stays held, marked as waited for while others wait.
      next = waiters_.front();
      waiters_.pop_front();
      state_.store(waiters_.empty() ? kLocked : kWaitedFor);
    }
    post_([next] { next.resume(); });
  }

  Post post_;
  std::atomic<int> state_{kFree};
  std::mutex mu_;  // guards waiters_, and the move to kWaitedFor
  // guarded by mu_. A list, not a deque: an empty deque allocates (its map and a first block),
  // and a mutex is made for every lock cycle (lock/holds.h) that nearly never waits.
  std::list<std::coroutine_handle<>> waiters_;
};

}  // namespace dlock::engine

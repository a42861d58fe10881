// SPDX-License-Identifier: MIT
// AsyncMutex: mutual exclusion between Tasks across suspension points (a node round trip), for
// what must stay serialized while a round is in flight: the acquisitions and releases of one
// (name, owner) in Holds, the greetings of Membership. A waiting Task suspends instead of
// blocking its thread, so the io thread never blocks on it.
//
// Ownership passes straight to the first waiter on unlock; the waiter resumes on the io thread
// (through `post`), never inside unlock(): the unlocking Task goes on without running another.
#pragma once

#include <coroutine>
#include <functional>
#include <list>
#include <mutex>
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
      if (!m_.locked_) {
        m_.locked_ = true;
        return false;
      }
      m_.waiters_.push_back(h);
      return true;
    }
    Guard await_resume() { return Guard(&m_); }

   private:
    AsyncMutex& m_;
  };
  Locking lock() { return Locking(*this); }

 private:
  bool try_lock() {
    std::lock_guard lock(mu_);
    if (locked_) return false;
    locked_ = true;
    return true;
  }
  void unlock() {
    std::coroutine_handle<> next;
    {
      std::lock_guard lock(mu_);
      if (waiters_.empty()) {
        locked_ = false;
        return;
      }
      next = waiters_.front();
      waiters_.pop_front();
    }
    post_([next] { next.resume(); });
  }

  Post post_;
  std::mutex mu_;
  bool locked_ = false;  // guarded by mu_
  // guarded by mu_. A list, not a deque: an empty deque allocates (its map and a first block),
  // and a mutex is made for every lock cycle (lock/holds.h) that nearly never waits.
  std::list<std::coroutine_handle<>> waiters_;
};

}  // namespace dlock::engine

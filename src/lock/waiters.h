// SPDX-License-Identifier: MIT
// Waiters: threads blocked in Client::lock(), and Tasks suspended in async_lock, woken by
// release messages instead of polling.
//
// A waiter registers on the lock's release channel before it tries, so no release between its
// attempt and its sleep goes unseen. The client subscribes to a channel once per node (one
// subscriber connection per node, shared by all waiters) and keeps the subscription a while
// after the last waiter left, since contended names tend to stay contended.
//
// Thread-safety: enter/leave from any thread (enter, which may wait for a SUBSCRIBE, not on the
// io thread: enter_task there); on_message from the io thread. The io thread also calls back
// when it unsubscribes a dropped channel: the nodes must go before the Waiters.
#pragma once

#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/task.h"
#include "node/node_set.h"

namespace dlock::lock {

class Waiter {
 public:
  using Clock = std::chrono::steady_clock;
  Waiter(std::string channel, std::string wake_for, bool wakes_on_every = false)
      : channel_(std::move(channel)),
        wake_for_(std::move(wake_for)),
        wakes_on_every_(wakes_on_every) {}

  const std::string& channel() const noexcept { return channel_; }
  // Empty: any release wakes this waiter. Else only a release naming it (fair mode).
  const std::string& wake_for() const noexcept { return wake_for_; }
  // Every release wakes it, not just one plain waiter per release (a reader: all waiting
  // readers may get in together).
  bool wakes_on_every() const noexcept { return wakes_on_every_; }

  void signal();
  // Signals unless already signalled; true if this call did.
  bool signal_if_idle();
  // Clears the signal; true if there was one.
  bool take_signal();
  void cancel();
  // Forgets signals seen so far (call before each attempt: later ones are kept).
  void reset();
  // True if signalled before `until`.
  bool wait_until(Clock::time_point until);
  bool cancelled();
  bool signalled();
  // Signalled or cancelled (what ends a wait).
  bool woken();
  // `hook` runs (under the waiter's mutex: it must only post) whenever the waiter is signalled
  // or cancelled from now on, and at once if it already is; empty: no hook.
  void on_wake(std::function<void()> hook);

 private:
  const std::string channel_;
  const std::string wake_for_;
  const bool wakes_on_every_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool signalled_ = false;      // guarded by mu_
  bool cancelled_ = false;      // guarded by mu_
  std::function<void()> hook_;  // guarded by mu_
};

// co_await WaitUntil(waiter, until, io) -> true if signalled before `until`: Waiter::wait_until
// for a Task on the io thread `io` runs (it suspends; a release message, a cancellation or the
// timer resumes it there).
class WaitUntil {
 public:
  WaitUntil(std::shared_ptr<Waiter> waiter, Waiter::Clock::time_point until, asio::io_context& io)
      : waiter_(std::move(waiter)), until_(until), io_(io) {}
  bool await_ready() { return waiter_->woken() || Waiter::Clock::now() >= until_; }
  void await_suspend(std::coroutine_handle<> h);
  bool await_resume();

 private:
  std::shared_ptr<Waiter> waiter_;
  Waiter::Clock::time_point until_;
  asio::io_context& io_;
};

class Waiters {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a channel stays subscribed after its last waiter left.
  static constexpr std::chrono::seconds kLinger{10};

  // `linger`: kLinger in the client; tests shorten it to drop channels within a test.
  explicit Waiters(node::NodeSet& nodes, std::chrono::milliseconds linger = kLinger)
      : nodes_(nodes), linger_(linger) {}

  // Registers a waiter on `channel`, subscribing first if this client is not yet subscribed.
  // `wakes_on_every`: see Waiter (readers).
  std::shared_ptr<Waiter> enter(const std::string& channel, std::string wake_for,
                                bool wakes_on_every = false);
  engine::Task<std::shared_ptr<Waiter>> enter_task(std::string channel, std::string wake_for,
                                                   bool wakes_on_every = false);
  void leave(const std::shared_ptr<Waiter>& waiter);
  void on_message(const std::string& channel, const std::string& payload);
  // Whether this client's subscriber connections are subscribed to `channel` (then a PUBLISH
  // there counts us among its receivers), and how many of its threads wait on it.
  struct Listening {
    bool subscribed = false;
    std::size_t waiters = 0;
  };
  Listening listening(const std::string& channel);

 private:
  struct Channel {
    std::vector<std::shared_ptr<Waiter>> waiters;
    bool subscribed = false;
    Clock::time_point idle_since;
  };

  // Registers `waiter`; true if this client must subscribe to its channel first.
  bool add(const std::shared_ptr<Waiter>& waiter);
  void mark_subscribed(const std::string& channel);
  // Wakes one idle plain waiter (not a fair one, not one woken on every release).
  void wake_one_locked(Channel& channel);

  node::NodeSet& nodes_;
  const std::chrono::milliseconds linger_;
  std::mutex mu_;
  std::map<std::string, Channel> channels_;  // guarded by mu_
};

}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
// Waiters: threads blocked in Client::lock(), woken by release messages instead of polling.
//
// A waiter registers on the lock's release channel before it tries, so no release between its
// attempt and its sleep goes unseen. The client subscribes to a channel once per node (one
// subscriber connection per node, shared by all waiters) and keeps the subscription a while
// after the last waiter left, since contended names tend to stay contended.
//
// Thread-safety: enter/leave from any thread; on_message from the io thread. The io thread also
// calls back when it unsubscribes a dropped channel: the nodes must go before the Waiters.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "node/node_set.h"

namespace dlock::lock {

class Waiter {
 public:
  using Clock = std::chrono::steady_clock;
  Waiter(std::string channel, std::string wake_for, std::string ignore = {})
      : channel_(std::move(channel)), wake_for_(std::move(wake_for)), ignore_(std::move(ignore)) {}

  const std::string& channel() const noexcept { return channel_; }
  // Empty: any release wakes this waiter. Else only a release naming it (fair mode).
  const std::string& wake_for() const noexcept { return wake_for_; }
  // A release message that does not wake this waiter (its own release: "~" + owner).
  const std::string& ignore() const noexcept { return ignore_; }

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

 private:
  const std::string channel_;
  const std::string wake_for_;
  const std::string ignore_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool signalled_ = false;  // guarded by mu_
  bool cancelled_ = false;  // guarded by mu_
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
  std::shared_ptr<Waiter> enter(const std::string& channel, std::string wake_for,
                                std::string ignore = {});
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

  // Wakes one idle plain waiter that does not ignore `payload`.
  void wake_one_locked(Channel& channel, const std::string& payload);

  node::NodeSet& nodes_;
  const std::chrono::milliseconds linger_;
  std::mutex mu_;
  std::map<std::string, Channel> channels_;  // guarded by mu_
};

}  // namespace dlock::lock

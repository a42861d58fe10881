// SPDX-License-Identifier: MIT
#include "lock/waiters.h"

#include <algorithm>

namespace dlock::lock {

void Waiter::signal() {
  std::lock_guard lock(mu_);
  signalled_ = true;
  cv_.notify_all();
}

void Waiter::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  cv_.notify_all();
}

bool Waiter::signal_if_idle() {
  std::lock_guard lock(mu_);
  if (signalled_) return false;
  signalled_ = true;
  cv_.notify_all();
  return true;
}

bool Waiter::take_signal() {
  std::lock_guard lock(mu_);
  const bool was = signalled_;
  signalled_ = false;
  return was;
}

void Waiter::reset() {
  std::lock_guard lock(mu_);
  signalled_ = false;
}

bool Waiter::wait_until(Clock::time_point until) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, until, [this] { return signalled_ || cancelled_; });
  return signalled_;
}

bool Waiter::cancelled() {
  std::lock_guard lock(mu_);
  return cancelled_;
}

std::shared_ptr<Waiter> Waiters::enter(const std::string& channel, std::string wake_for,
                                       std::string ignore) {
  auto waiter = std::make_shared<Waiter>(channel, std::move(wake_for), std::move(ignore));
  bool subscribe = false;
  {
    std::lock_guard lock(mu_);
    Channel& c = channels_[channel];
    c.waiters.push_back(waiter);
    subscribe = !c.subscribed;
  }
  if (subscribe) {
    // Several threads may get here at once for a new channel; subscribing twice is harmless.
    (void)nodes_.subscribe(channel);
    std::lock_guard lock(mu_);
    channels_[channel].subscribed = true;
  }
  return waiter;
}

Waiters::Listening Waiters::listening(const std::string& channel) {
  std::lock_guard lock(mu_);
  auto it = channels_.find(channel);
  if (it == channels_.end()) return {};
  return {it->second.subscribed, it->second.waiters.size()};
}

void Waiters::leave(const std::shared_ptr<Waiter>& waiter) {
  std::vector<std::string> drop;
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    auto it = channels_.find(waiter->channel());
    if (it != channels_.end()) {
      auto& w = it->second.waiters;
      w.erase(std::remove(w.begin(), w.end(), waiter), w.end());
      if (w.empty()) it->second.idle_since = now;
      // A wake-up this waiter got but will not use goes to the next plain waiter.
      if (waiter->wake_for().empty() && waiter->take_signal()) wake_one_locked(it->second, {});
    }
    for (auto c = channels_.begin(); c != channels_.end();) {
      if (c->second.waiters.empty() && now - c->second.idle_since > linger_) {
        drop.push_back(c->first);
        c = channels_.erase(c);
      } else {
        ++c;
      }
    }
  }
  // An enter may take a dropped channel up again before this UNSUBSCRIBE reaches the io thread,
  // and its SUBSCRIBE may get there first: sent after it, the UNSUBSCRIBE would leave the new
  // waiters deaf for good while the entry says subscribed. So the io thread decides, under mu_:
  // a channel absent then can only be entered again after, and its SUBSCRIBE comes after too.
  for (const auto& channel : drop) {
    nodes_.unsubscribe(channel, [this, channel] {
      std::lock_guard lock(mu_);
      return channels_.count(channel) != 0;
    });
  }
}

void Waiters::wake_one_locked(Channel& channel, const std::string& payload) {
  for (auto& w : channel.waiters) {
    if (!w->wake_for().empty()) continue;
    if (!payload.empty() && w->ignore() == payload) continue;
    if (w->signal_if_idle()) return;
  }
}

void Waiters::on_message(const std::string& channel, const std::string& payload) {
  std::lock_guard lock(mu_);
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  // A fair waiter wakes only when the release names it (it is next in line). Of the plain
  // waiters only one wakes per message: this client's other waiters would only lose the race
  // to it, so waking them all would cost n attempts per release (a thundering herd). Each node
  // sends its own message, so a release wakes up to N waiters here.
  for (auto& w : it->second.waiters) {
    if (!w->wake_for().empty() && w->wake_for() == payload) w->signal();
  }
  wake_one_locked(it->second, payload);
}

}  // namespace dlock::lock

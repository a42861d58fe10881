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

std::shared_ptr<Waiter> Waiters::enter(const std::string& channel, std::string wake_for) {
  auto waiter = std::make_shared<Waiter>(channel, std::move(wake_for));
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
    }
    for (auto c = channels_.begin(); c != channels_.end();) {
      if (c->second.waiters.empty() && now - c->second.idle_since > kLinger) {
        drop.push_back(c->first);
        c = channels_.erase(c);
      } else {
        ++c;
      }
    }
  }
  for (const auto& channel : drop) nodes_.unsubscribe(channel);
}

void Waiters::on_message(const std::string& channel, const std::string& payload) {
  std::lock_guard lock(mu_);
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  for (auto& w : it->second.waiters) {
    // Plain waiters wake on every release; a fair waiter only when it is next in line.
    if (w->wake_for().empty() || w->wake_for() == payload) w->signal();
  }
}

}  // namespace dlock::lock

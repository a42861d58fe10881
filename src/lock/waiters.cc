// SPDX-License-Identifier: MIT
#include "lock/waiters.h"

#include <algorithm>

namespace dlock::lock {

void Waiter::signal() {
  std::lock_guard lock(mu_);
  signalled_ = true;
  cv_.notify_all();
  if (hook_) hook_();
}

void Waiter::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  cv_.notify_all();
  if (hook_) hook_();
}

bool Waiter::signal_if_idle() {
  std::lock_guard lock(mu_);
  if (signalled_) return false;
  signalled_ = true;
  cv_.notify_all();
  if (hook_) hook_();
  return true;
}

bool Waiter::signalled() {
  std::lock_guard lock(mu_);
  return signalled_;
}

bool Waiter::woken() {
  std::lock_guard lock(mu_);
  return signalled_ || cancelled_;
}

void Waiter::on_wake(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  hook_ = std::move(hook);
  if (hook_ && (signalled_ || cancelled_)) hook_();
}

namespace {

// What a suspended WaitUntil and its wake-ups share; touched on the io thread only.
struct Wakeup {
  explicit Wakeup(asio::io_context& io) : timer(io) {}
  asio::steady_timer timer;
  std::coroutine_handle<> h;
  bool fired = false;
  void fire() {
    if (fired) return;
    fired = true;
    timer.cancel();
    h.resume();
  }
};

// co_await on the subscriber side: NodeSet::subscribe(channel, done).
class SubscribeRound : public node::RoundAwaiter<SubscribeRound> {
 public:
  SubscribeRound(node::NodeSet& nodes, std::string channel)
      : nodes_(nodes), channel_(std::move(channel)) {}
  void begin(node::Fanout::Done done) { nodes_.subscribe(channel_, std::move(done)); }

 private:
  node::NodeSet& nodes_;
  std::string channel_;
};

}  // namespace

void WaitUntil::await_suspend(std::coroutine_handle<> h) {
  auto wakeup = std::make_shared<Wakeup>(io_);
  wakeup->h = h;
  wakeup->timer.expires_at(until_);
  wakeup->timer.async_wait([wakeup](const asio::error_code&) { wakeup->fire(); });
  // A message or a cancellation may come from any thread: it posts, the io thread resumes.
  waiter_->on_wake([wakeup, &io = io_] { asio::post(io, [wakeup] { wakeup->fire(); }); });
}

bool WaitUntil::await_resume() {
  waiter_->on_wake({});
  return waiter_->signalled();
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

bool Waiters::add(const std::shared_ptr<Waiter>& waiter) {
  std::lock_guard lock(mu_);
  Channel& c = channels_[waiter->channel()];
  c.waiters.push_back(waiter);
  return !c.subscribed;
}

void Waiters::mark_subscribed(const std::string& channel) {
  std::lock_guard lock(mu_);
  channels_[channel].subscribed = true;
}

std::shared_ptr<Waiter> Waiters::enter(const std::string& channel, std::string wake_for,
                                       bool wakes_on_every) {
  auto waiter = std::make_shared<Waiter>(channel, std::move(wake_for), wakes_on_every);
  // Several threads may subscribe at once for a new channel; subscribing twice is harmless.
  if (add(waiter)) {
    (void)nodes_.subscribe(channel);
    mark_subscribed(channel);
  }
  return waiter;
}

engine::Task<std::shared_ptr<Waiter>> Waiters::enter_task(std::string channel, std::string wake_for,
                                                          bool wakes_on_every) {
  auto waiter = std::make_shared<Waiter>(channel, std::move(wake_for), wakes_on_every);
  if (add(waiter)) {
    SubscribeRound subscribed(nodes_, channel);
    (void)co_await subscribed;
    mark_subscribed(channel);
  }
  co_return waiter;
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
      if (waiter->wake_for().empty() && !waiter->wakes_on_every() && waiter->take_signal()) {
        wake_one_locked(it->second);
      }
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

void Waiters::wake_one_locked(Channel& channel) {
  for (auto& w : channel.waiters) {
    if (!w->wake_for().empty() || w->wakes_on_every()) continue;
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
  // sends its own message, so a release wakes up to N waiters here. Readers all wake: they
  // may all get in together.
  // An empty payload names nobody: a forced release with nobody in line, or the channel
  // subscribed again after its connection was lost (node/server_node.cc), when any release may
  // have been missed. Every fair waiter tries again (each sees whether it is first), and of the
  // plain ones still only one, as for any release (a subscriber that keeps being dropped would
  // otherwise cost every waiter an attempt per reconnect).
  for (auto& w : it->second.waiters) {
    if (w->wakes_on_every() ||
        (!w->wake_for().empty() && (payload.empty() || w->wake_for() == payload))) {
      w->signal();
    }
  }
  wake_one_locked(it->second);
}

}  // namespace dlock::lock

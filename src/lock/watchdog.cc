// SPDX-License-Identifier: MIT
#include "lock/watchdog.h"

#include <algorithm>

namespace dlock::lock {

namespace {
using Status = detail::LeaseState::Status;
}  // namespace

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string Watchdog::key_of(const std::string& name, const OwnerToken& owner) {
  std::string key = name;
  key += '\0';
  key += owner.str();
  return key;
}

void Watchdog::prune_locked() {
  for (auto it = leases_.begin(); it != leases_.end();) {
    auto state = it->second.lock();
    bool gone = !state;
    if (state) {
      std::lock_guard lock(state->mu);
      gone = state->status == Status::released;
    }
    it = gone ? leases_.erase(it) : std::next(it);
  }
  prune_at_ = std::max<std::size_t>(1024, leases_.size() * 2);
}

void Watchdog::track(const std::shared_ptr<detail::LeaseState>& state) {
  std::lock_guard lock(mu_);
  if (leases_.size() >= prune_at_) prune_locked();
  leases_.emplace(key_of(state->name, state->owner), state);
  if (!state->auto_renew) return;
  const auto due = Clock::now() + state->renew_every;
  if (due < next_tick_) {
    next_tick_ = due;
    cv_.notify_all();
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

std::shared_ptr<detail::LeaseState> Watchdog::find_held(const std::string& name,
                                                        const OwnerToken& owner,
                                                        const detail::LeaseState* except) {
  std::lock_guard lock(mu_);
  auto [first, last] = leases_.equal_range(key_of(name, owner));
  for (auto it = first; it != last; ++it) {
    auto state = it->second.lock();
    if (state && state.get() != except && state->held_now()) return state;
  }
  return nullptr;
}

std::size_t Watchdog::tracked() {
  std::lock_guard lock(mu_);
  prune_locked();
  return leases_.size();
}

void Watchdog::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (Clock::now() < next_tick_) {
      if (next_tick_ == Clock::time_point::max()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, next_tick_);
      }
      continue;
    }
    next_tick_ = Clock::time_point::max();
    lock.unlock();
    const auto next = tick();
    lock.lock();
    next_tick_ = std::min(next_tick_, next);
  }
}

Watchdog::Clock::time_point Watchdog::tick() {
  std::vector<std::shared_ptr<detail::LeaseState>> due;
  {
    std::lock_guard lock(mu_);
    prune_locked();
    for (auto& [key, weak] : leases_) {
      if (auto state = weak.lock(); state && state->auto_renew) due.push_back(std::move(state));
    }
  }

  std::vector<Renewal> renewals;
  std::vector<std::shared_ptr<detail::LeaseState>> renewing;
  auto period = Clock::duration::max();
  for (auto& state : due) {
    std::lock_guard lock(state->mu);
    if (state->status != Status::held) continue;
    if (state->thread_alive && !state->thread_alive->load()) {
      // Its thread exited without releasing it: stop renewing; the key ends within the ttl.
      state->status = Status::lost;
      continue;
    }
    renewals.push_back(Renewal{state->name, state->owner, state->ttl, state->valid_until});
    renewing.push_back(state);
    period = std::min<Clock::duration>(period, state->renew_every);
  }
  if (renewals.empty()) return Clock::time_point::max();

  const auto start = Clock::now();
  std::vector<Result<Clock::time_point>> results = lock_.renew(renewals);
  auto next = start + period;
  std::vector<std::pair<std::shared_ptr<detail::LeaseState>, Error>> lost;
  for (std::size_t k = 0; k < renewing.size(); ++k) {
    auto& state = renewing[k];
    std::lock_guard lock(state->mu);
    if (state->status != Status::held) continue;  // released while we were renewing
    const auto& r = results[k];
    if (r) {
      state->valid_until = std::max(state->valid_until, *r);
      state->renewed_at = start;
    } else if (r.error().is(errc::lock_lost) || Clock::now() >= state->valid_until) {
      state->status = Status::lost;
      lost.emplace_back(state, r.error());
    } else {
      // Too few nodes answered but the validity still stands: try again well before it ends.
      const auto left = state->valid_until - Clock::now();
      next = std::min(next, Clock::now() + std::clamp<Clock::duration>(
                                               left / 4, std::chrono::milliseconds(10), period));
    }
  }
  for (auto& [state, error] : lost) {
    if (state->on_lost) state->on_lost(error);
  }
  return next;
}

}  // namespace dlock::lock

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

void Watchdog::prune_locked() {
  for (auto it = leases_.begin(); it != leases_.end();) {
    auto state = it->lock();
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
  leases_.push_back(state);
  if (!state->auto_renew) return;
  const auto due = Clock::now() + state->renew_every;
  if (due < next_tick_) {
    next_tick_ = due;
    cv_.notify_all();
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
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
    for (auto& weak : leases_) {
      if (auto state = weak.lock(); state && state->auto_renew) due.push_back(std::move(state));
    }
  }

  std::vector<Renewal> renewals;
  std::vector<std::shared_ptr<detail::LeaseState>> renewing;
  std::vector<std::pair<std::shared_ptr<detail::LeaseState>, Error>> lost;
  auto period = Clock::duration::max();
  for (auto& state : due) {
    std::lock_guard lock(state->mu);
    if (state->status != Status::held) continue;
    if (state->thread_alive && !state->thread_alive->load()) {
      // Its thread exited without releasing it: stop renewing; the key ends within the ttl.
      state->status = Status::lost;
      continue;
    }
    if (state->hold->lost.load()) {
      // Another lease of the same hold found it gone.
      state->status = Status::lost;
      lost.emplace_back(state, Error(errc::lock_lost, "lock '" + state->name() +
                                                          "' was lost (found gone by a reentrant "
                                                          "lease of the same hold)"));
      continue;
    }
    renewals.push_back(Renewal{state->hold->id, state->ttl, state->valid_until});
    renewing.push_back(state);
    period = std::min<Clock::duration>(period, state->renew_every);
  }
  const auto start = Clock::now();
  std::vector<Result<Clock::time_point>> results = lock_.renew(renewals);
  auto next = renewals.empty() ? Clock::time_point::max() : start + period;
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
      if (r.error().is(errc::lock_lost)) state->hold->lost.store(true);
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

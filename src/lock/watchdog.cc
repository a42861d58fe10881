// SPDX-License-Identifier: MIT
#include "lock/watchdog.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "engine/background_thread.h"
#include "engine/thread_role.h"

namespace dlock::lock {

namespace {
using Status = detail::LeaseState::Status;
using Clock = std::chrono::steady_clock;
using Lost = std::vector<std::pair<std::shared_ptr<detail::LeaseState>, Error>>;

// Leases renewed and applied per round within a tick.
constexpr std::size_t kApplyBatch = 4096;

// Applies one lease's renewal result; `next` is lowered when the lease must be retried sooner.
// Returns whether the lease was renewed (nullopt: released meanwhile, nothing to report).
std::optional<bool> apply(const std::shared_ptr<detail::LeaseState>& state,
                          const Result<Clock::time_point>& r, Clock::time_point start,
                          Clock::duration period, Clock::time_point& next, Lost& lost) {
  std::lock_guard lock(state->mu);
  if (state->status != Status::held) return std::nullopt;  // released while we were renewing
  // Validity that ended while this thread waited for the lease's mutex is final: in the
  // meantime the same owner may have taken a new hold (an expired lease is not live), and
  // reviving this one would make two holders.
  const auto now = Clock::now();
  const bool expired = now >= state->valid_until;
  const bool gone = !r && r.error().is(errc::lock_lost);  // a quorum said it is not there
  if (r && !expired) {
    state->valid_until = std::max(state->valid_until, *r);
    state->renewed_at = start;
    return true;
  }
  if (gone || expired) {
    state->status = Status::lost;
    // A quorum saying "not there" loses the hold (its other leases too); this lease's own
    // validity running out loses this lease only.
    if (gone) state->hold->lost.store(true);
    lost.emplace_back(
        state,
        gone ? r.error() : Error(errc::lock_lost, "lock '" + state->name() + "': validity ended"));
  } else {
    // Too few nodes answered, or the renewal was judged against a validity that a user's
    // extend has since pushed further: the validity still stands, try again well before it
    // ends: after a quarter of what is left, not sooner than 10 ms (no storm against a node
    // that is down), but never later than the tick's period (the shortest renew_every among
    // the leases due), even when that is under 10 ms. Not std::clamp: a period under 10 ms
    // would make its range inverted.
    const auto left = state->valid_until - Clock::now();
    const auto retry = std::max<Clock::duration>(left / 4, std::chrono::milliseconds(10));
    next = std::min(next, Clock::now() + std::min<Clock::duration>(retry, period));
  }
  return false;
}
// Fills `batch` (and `renewing`, the same leases) with the held leases of due[i...], at most
// kApplyBatch; a lease whose thread exited, or whose hold another lease found gone, turns lost
// instead. Lowers `period` to the smallest renew interval seen. Returns where the next batch
// starts.
std::size_t next_batch(const std::vector<std::shared_ptr<detail::LeaseState>>& due, std::size_t i,
                       std::vector<Renewal>& batch,
                       std::vector<std::shared_ptr<detail::LeaseState>>& renewing,
                       Clock::duration& period, Lost& lost) {
  batch.clear();
  renewing.clear();
  for (; i < due.size() && batch.size() < kApplyBatch; ++i) {
    const auto& state = due[i];
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
      lost.emplace_back(state,
                        Error(errc::lock_lost, "lock '" + state->name() +
                                                   "' was lost (found gone by a reentrant lease "
                                                   "of the same hold)"));
      continue;
    }
    batch.push_back(Renewal{state->hold->id, state->ttl, state->valid_until});
    renewing.push_back(state);
    period = std::min<Clock::duration>(period, state->renew_every);
  }
  return i;
}

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
  // One pass (erase-remove), not an erase per dead entry: that shifted the rest of the vector
  // each time, quadratic in the leases tracked, under mu_, which track() waits for.
  std::erase_if(leases_, [](const std::weak_ptr<detail::LeaseState>& weak) {
    auto state = weak.lock();
    if (!state) return true;
    std::lock_guard lock(state->mu);
    return state->status == Status::released;
  });
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
  if (!thread_.joinable()) thread_ = engine::background_thread([this] { run(); });
}

std::size_t Watchdog::tracked() {
  std::lock_guard lock(mu_);
  prune_locked();
  return leases_.size();
}

void Watchdog::run() {
  engine::become_watchdog_thread();
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

  const auto tick_start = Clock::now();
  auto period = Clock::duration::max();
  auto next = Clock::time_point::max();
  Lost lost;
  // Renew and apply a bounded batch at a time: a result is applied right after its round, so a
  // large round (100,000 leases on a busy server) neither shrinks every lease's new validity by
  // the whole round's duration nor lets validities end while results wait to be applied. The
  // requests (a copy of each hold's id) exist for one batch at a time, so a tick's memory does
  // not grow with the number of leases.
  std::vector<Renewal> batch;
  std::vector<std::shared_ptr<detail::LeaseState>> renewing;
  batch.reserve(std::min(due.size(), kApplyBatch));
  renewing.reserve(std::min(due.size(), kApplyBatch));
  for (std::size_t i = 0; i < due.size();) {
    i = next_batch(due, i, batch, renewing, period, lost);
    if (batch.empty()) continue;
    const auto start = Clock::now();
    const std::vector<Result<Clock::time_point>> results = lock_.renew(batch);
    for (std::size_t k = 0; k < renewing.size(); ++k) {
      const auto renewed = apply(renewing[k], results[k], start, period, next, lost);
      if (observer_ != nullptr && renewed) {
        observer_->renewed(RenewEvent{renewing[k]->name(), *renewed, /*by_watchdog=*/true});
      }
    }
  }
  if (period != Clock::duration::max()) next = std::min(next, tick_start + period);
  due.clear();
  for (auto& [state, error] : lost) {
    if (observer_ != nullptr) observer_->lost(LostEvent{state->name()});
    if (state->on_lost) state->on_lost(error);
  }
  return next;
}

}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
#include <dlock/lease.h>

#include "client_core.h"
#include "lock/keys.h"
#include "lock/lease_state.h"

namespace dlock {
namespace {

using Status = detail::LeaseState::Status;

Error moved_from() {
  return Error(errc::invalid_argument, "lease is empty (moved from)");
}

}  // namespace

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (state_) (void)unlock();
    core_ = std::move(other.core_);
    state_ = std::move(other.state_);
  }
  return *this;
}

Lease::~Lease() {
  if (!state_) return;
  try {
    (void)unlock();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw
  }
}

Result<void> Lease::unlock() {
  if (!state_) return moved_from();
  bool expired = false;
  {
    // Only the status change is under the lease's mutex: the holds' and the watchdog's mutexes
    // come before lease mutexes, so holding ours while calling them below could deadlock.
    std::lock_guard lock(state_->mu);
    if (state_->status == Status::released) return {};
    expired = state_->status == Status::lost || state_->hold->lost.load() ||
              detail::LeaseState::Clock::now() >= state_->valid_until;
    state_->status = Status::released;
  }
  // The hold's last lease releases it on all nodes, even when expired: nodes that still know
  // it must not keep the key. Reentrant leases before the last change nothing on the nodes.
  const auto started = detail::LeaseState::Clock::now();
  auto ended = core_->holds().end(state_);
  const auto& r = ended.released;
  if (ended.last && r && !expired && ended.listeners > 0) {
    // Someone else was listening (our own subscription, if any, is one of the listeners): let
    // a waiter have it before this client takes it back (lock/hand_off.h).
    const auto local = core_->waiters().listening(lock::release_channel(state_->name()));
    if (ended.listeners > (local.subscribed ? 1u : 0u) || local.waiters > 0) {
      core_->hand_off().released(state_->name(), detail::LeaseState::Clock::now() - started);
    }
  }
  if (expired || (!r && r.error().is(errc::not_owner))) {
    return Error(errc::lock_lost, "lock '" + state_->name() + "' had expired before release",
                 r ? std::vector<NodeError>{} : r.error().nodes());
  }
  return r;
}

Result<void> Lease::extend() {
  if (!state_) return moved_from();
  return extend(state_->ttl);
}

Result<void> Lease::extend(std::chrono::milliseconds ttl) {
  if (!state_) return moved_from();
  if (auto bad = core_->check(state_->name(), ttl)) return std::move(*bad);
  std::lock_guard lock(state_->mu);
  if (state_->status == Status::released) {
    return Error(errc::not_owner, "lock '" + state_->name() + "' was released");
  }
  if (state_->status == Status::lost || state_->hold->lost.load()) {
    state_->status = Status::lost;
    return Error(errc::lock_lost, "lock '" + state_->name() + "' was lost");
  }
  auto r = core_->algorithm().extend(state_->hold->id, ttl, state_->valid_until);
  if (r) {
    state_->valid_until = *r;
    return {};
  }
  if (r.error().is(errc::lock_lost)) {
    state_->status = Status::lost;
    state_->hold->lost.store(true);  // the reentrant leases of the same hold are lost with it
  }
  return std::move(r).error();
}

std::chrono::milliseconds Lease::validity() const {
  if (!state_) return std::chrono::milliseconds(0);
  std::lock_guard lock(state_->mu);
  if (state_->status != Status::held || state_->hold->lost.load()) {
    return std::chrono::milliseconds(0);
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      state_->valid_until - detail::LeaseState::Clock::now());
  return std::max(left, std::chrono::milliseconds(0));
}

bool Lease::is_held() const {
  return validity().count() > 0;
}

bool Lease::lost() const {
  if (!state_) return false;
  std::lock_guard lock(state_->mu);
  return state_->status == Status::lost ||
         (state_->status == Status::held && state_->hold->lost.load());
}

const std::string& Lease::name() const {
  static const std::string empty;
  return state_ ? state_->name() : empty;
}

const OwnerToken& Lease::owner() const {
  static const OwnerToken empty;
  return state_ ? state_->owner() : empty;
}

FencingToken Lease::fencing_token() const {
  return state_ ? state_->hold->fence : FencingToken();
}

std::chrono::milliseconds Lease::ttl() const {
  return state_ ? state_->ttl : std::chrono::milliseconds(0);
}

}  // namespace dlock

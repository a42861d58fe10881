// SPDX-License-Identifier: MIT
#include <dlock/lease.h>

#include "core/access.h"
#include "core/client_core.h"
#include "core/operations.h"
#include "engine/run.h"
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
  {
    // Released already (an unlock() before the destructor's): what unlock_task would find,
    // without a Task (a status never leaves released): the first unlock()'s failure again, if
    // it failed (the key lives until its ttl), else done.
    std::lock_guard lock(state_->mu);
    if (state_->status == Status::released) {
      if (state_->unlock_failed) return Result<void>(*state_->unlock_failed);
      return {};
    }
  }
  auto task = detail::unlock_task(core_, state_);
  if (engine::on_io_thread()) {
    // A Lease dropped inside the engine (an asio operation whose caller went away): release
    // without waiting, which the io thread must never do.
    engine::start(std::move(task), engine::counted(core_->started(), [](Result<void>) {}));
    return {};
  }
  return engine::run_sync(std::move(task));
}

Result<void> Lease::extend() {
  if (!state_) return moved_from();
  return extend(state_->ttl);
}

Result<void> Lease::extend(Millis ttl) {
  if (!state_) return moved_from();
  if (auto bad = core_->check(state_->name(), ttl)) return std::move(*bad);
  return engine::run_sync(detail::extend_task(core_, state_, ttl));
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

Result<OwnerToken> Lease::detach() {
  return detail::detach(*this);
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

bool Lease::shared() const {
  return state_ && state_->hold && state_->hold->id.kind == lock::HoldKind::read;
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

namespace dlock::detail {

Result<OwnerToken> detach(Lease& lease) {
  const auto core = Access::core(lease);
  const auto state = Access::state(lease);
  if (!state) return Error(errc::invalid_argument, "lease is empty (moved from)");
  if (auto bad = begin_detach(*state)) return std::move(*bad);
  OwnerToken owner = state->owner();
  (void)engine::run_sync(detach_task(core, state));
  Access::empty(lease);
  return owner;
}

}  // namespace dlock::detail

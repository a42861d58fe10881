// SPDX-License-Identifier: MIT
#include <dlock/semaphore.h>

#include <optional>
#include <random>
#include <stop_token>
#include <variant>

#include "core/access.h"
#include "core/client_core.h"
#include "core/operations.h"
#include "engine/run.h"
#include "lock/keys.h"
#include "lock/owner.h"
#include "lock/wait.h"

namespace dlock {
namespace {

using SteadyClock = std::chrono::steady_clock;

// What one pass over the slots came to.
struct Pass {
  std::optional<Lease> lease;
  std::optional<Error> error;        // the pass's error when no slot was had
  bool contended = false;            // at least one slot was held by another permit holder
  std::optional<Millis> holder_ttl;  // the soonest a held slot's key runs out
};

// One attempt at slot i, blocking the caller's thread or awaited on the io thread (`on`).
engine::Task<std::variant<Lease, lock::Refused>> slot_attempt(
    const std::shared_ptr<detail::ClientCore>& core, const std::string& name, std::size_t i,
    std::size_t permits, const LockOptions& options, const std::optional<OwnerToken>& fair_owner,
    const std::optional<lock::FairTicket>& fair, lock::WaitOn on) {
  // Each permit its own owner: the same thread taking two permits must get two slots, never
  // a reentrant second lease of one.
  LockOptions slot_options = options;
  const OwnerToken owner = fair_owner ? *fair_owner : lock::task_owner();
  slot_options.owner = owner;
  auto attempting = detail::attempt_task(core, lock::semaphore_slot(name, i), slot_options, owner,
                                         fair, false, lock::HoldKind::write, {}, permits);
  // Never blocks the io thread: the blocking API's wait runs on the caller's (LockAttempts).
  if (on == lock::WaitOn::caller_thread) co_return engine::run_sync(std::move(attempting));
  co_return co_await std::move(attempting);
}

// `fair_owner`, `fair`: a fair waiter's one owner and ticket for every slot (it queues once for
// the whole semaphore, lock/keys.h); otherwise each slot is tried under a fresh owner. `on`:
// blocking the caller's thread, or awaited on the io thread (the asio API). The references
// must outlive the Task (PermitPasses' members).
engine::Task<Pass> one_pass(const std::shared_ptr<detail::ClientCore>& core,
                            const std::string& name, std::size_t permits,
                            const LockOptions& options, detail::Rounds& rounds,
                            const std::optional<OwnerToken>& fair_owner,
                            const std::optional<lock::FairTicket>& fair, lock::WaitOn on) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::size_t first = std::uniform_int_distribution<std::size_t>(0, permits - 1)(rng);
  Pass pass;
  std::size_t held = 0;
  for (std::size_t k = 0; k < permits; ++k) {
    ++rounds.sent;
    auto attempting =
        slot_attempt(core, name, (first + k) % permits, permits, options, fair_owner, fair, on);
    auto r = co_await std::move(attempting);
    if (auto* lease = std::get_if<Lease>(&r)) {
      pass.lease = std::move(*lease);
      co_return pass;
    }
    auto& refused = std::get<lock::Refused>(r);
    rounds.refused(refused.error);
    if (refused.error.is(errc::lock_held)) {
      ++held;
      if (refused.holder_ttl) {
        pass.holder_ttl =
            std::min(pass.holder_ttl.value_or(*refused.holder_ttl), Millis(*refused.holder_ttl));
      }
      if (!pass.error) pass.error = std::move(refused.error);
      continue;
    }
    if (refused.error.is(errc::invalid_argument)) {
      // Another permit count is recorded on a node: say so in the semaphore's own name.
      pass.error =
          Error(errc::invalid_argument, "semaphore '" + name + "': " + refused.error.summary(),
                refused.error.nodes());
      co_return pass;
    }
    // A slot that could not be judged is not "taken": the pass reports that error unless every
    // slot was held.
    const bool retryable = lock::retryable(refused.error);
    pass.error = std::move(refused.error);
    if (!retryable) co_return pass;
  }
  pass.contended = held > 0;
  if (held == permits) {
    pass.error =
        Error(errc::lock_held,
              "semaphore '" + name + "': all " + std::to_string(permits) + " permits are taken",
              pass.error->nodes());
  }
  co_return pass;
}

std::optional<Error> check(const detail::ClientCore& core, const std::string& name,
                           std::size_t permits, const LockOptions& options) {
  if (name.empty()) return Error(errc::invalid_argument, "semaphore name must not be empty");
  if (permits == 0 || permits > Semaphore::kMaxPermits) {
    return Error(errc::invalid_argument, "a semaphore has 1 to " +
                                             std::to_string(Semaphore::kMaxPermits) +
                                             " permits, got " + std::to_string(permits));
  }
  if (options.owner) {
    return Error(errc::invalid_argument,
                 "a semaphore gives every permit its own owner: LockOptions::owner must be unset");
  }
  return detail::check_options(core, lock::semaphore_slot(name, permits - 1), options);
}

// The semaphore's attempts for the wait (lock/wait.h): a pass over the slots each, on the
// caller's thread or the io thread (`on`).
class PermitPasses final : public lock::Attempts {
 public:
  PermitPasses(std::shared_ptr<detail::ClientCore> core, std::string name, std::size_t permits,
               LockOptions options, detail::Rounds& rounds, std::optional<OwnerToken> fair_owner,
               std::optional<lock::FairTicket> fair, lock::WaitOn on)
      : core_(std::move(core)),
        name_(std::move(name)),
        permits_(permits),
        options_(std::move(options)),
        rounds_(rounds),
        fair_owner_(std::move(fair_owner)),
        fair_(std::move(fair)),
        on_(on) {}

  engine::Task<std::optional<lock::Refusal>> attempt(
      lock::WriterWait /*no writers here*/) override {
    auto passing = one_pass(core_, name_, permits_, options_, rounds_, fair_owner_, fair_, on_);
    Pass pass = co_await std::move(passing);
    if (pass.lease) {
      lease = std::move(*pass.lease);
      co_return std::nullopt;
    }
    co_return lock::Refusal{std::move(*pass.error), pass.contended, pass.holder_ttl, false};
  }
  bool drop_lapsed() override { return detail::drop_lapsed(lease); }

  std::optional<Lease> lease;  // the permit the pass that got one took

 private:
  const std::shared_ptr<detail::ClientCore> core_;
  const std::string name_;
  const std::size_t permits_;
  const LockOptions options_;
  detail::Rounds& rounds_;
  const std::optional<OwnerToken> fair_owner_;
  const std::optional<lock::FairTicket> fair_;
  const lock::WaitOn on_;
};

// How a permit is waited for: one channel for all slots (lock/keys.h), so any permit given
// back wakes one waiter of this client; a fair waiter queues once for the whole semaphore, on
// slot 0, and wakes only when a release names it the first in line.
lock::WaitPlan permit_wait_plan(const std::string& name, const LockOptions& options, Millis wait,
                                const std::optional<OwnerToken>& fair_owner,
                                const std::optional<lock::FairTicket>& fair) {
  lock::WaitPlan plan;
  plan.deadline = SteadyClock::now() + std::min<Millis>(wait, detail::kMaxWait);
  plan.waits = wait.count() > 0;
  plan.name = lock::semaphore_slot(name, 0);
  plan.wake_for = fair_owner ? fair_owner->str() : "";
  plan.queue_owner = fair_owner.value_or(OwnerToken());
  plan.queued = fair && fair->enqueue;
  plan.nap.retry_delay = options.retry_delay;
  if (fair) plan.nap.queue_timeout = options.fair_waiter_timeout;
  plan.nap.jitter_every_nap = true;
  plan.timeout = lock::TimeoutText{"semaphore '", name, "': no permit free after ", wait};
  return plan;
}

Result<Lease> acquire_permit(const std::shared_ptr<detail::ClientCore>& core,
                             const std::string& name, std::size_t permits,
                             const LockOptions& options, Millis wait, std::stop_token stop,
                             detail::Rounds& rounds) {
  if (auto bad = check(*core, name, permits, options)) return std::move(*bad);
  if (wait.count() < 0) return Error(errc::invalid_argument, "wait must not be negative");
  // Fair: one owner for the whole wait, queued once for all slots under one arrival ticket;
  // the first live waiter in line takes whichever slot is free, the others wait their turn.
  const std::optional<lock::FairTicket> fair = detail::fair_ticket(options, wait.count() > 0);
  const std::optional<OwnerToken> fair_owner =
      fair ? std::optional<OwnerToken>(lock::task_owner()) : std::nullopt;
  PermitPasses passes(core, name, permits, options, rounds, fair_owner, fair,
                      lock::WaitOn::caller_thread);
  lock::WaitCancel cancel;
  std::stop_callback on_stop(stop, [&cancel] { cancel.cancel(); });
  auto waited =
      lock::wait_sync(permit_wait_plan(name, options, wait, fair_owner, fair),
                      detail::wait_context(*core, lock::WaitOn::caller_thread), passes, cancel);
  if (!waited) return std::move(waited).error();
  return detail::hand_over(std::move(*passes.lease), name);
}

}  // namespace

namespace detail {

engine::Task<Result<Lease>> permit_task(std::shared_ptr<ClientCore> core, std::string name,
                                        std::size_t permits, std::chrono::milliseconds wait,
                                        LockOptions options,
                                        std::shared_ptr<lock::WaitCancel> cancel,
                                        std::shared_ptr<Rounds> rounds) {
  // Cancelled before anything was sent: take no permit at all.
  if (cancel->cancelled()) co_return Error(errc::cancelled, "wait cancelled");
  const std::optional<lock::FairTicket> fair = fair_ticket(options, wait.count() > 0);
  const std::optional<OwnerToken> fair_owner =
      fair ? std::optional<OwnerToken>(lock::task_owner()) : std::nullopt;
  PermitPasses passes(core, name, permits, options, *rounds, fair_owner, fair,
                      lock::WaitOn::io_thread);
  auto waiting = lock::wait_task(permit_wait_plan(name, options, wait, fair_owner, fair),
                                 wait_context(*core, lock::WaitOn::io_thread), passes, *cancel);
  auto waited = co_await std::move(waiting);
  if (!waited) co_return std::move(waited).error();
  co_return detail::hand_over(std::move(*passes.lease), name);
}

std::optional<Error> check_permit(const ClientCore& core, const std::string& name,
                                  std::size_t permits, const LockOptions& options,
                                  std::chrono::milliseconds wait) {
  if (auto bad = check(core, name, permits, options)) return bad;
  if (wait.count() < 0) return Error(errc::invalid_argument, "wait must not be negative");
  return std::nullopt;
}

}  // namespace detail

Semaphore::Semaphore(Client client, std::string name, std::size_t permits, LockOptions options)
    : client_(std::move(client)),
      name_(std::move(name)),
      permits_(permits),
      options_(std::move(options)) {}

std::string Semaphore::slot_name(std::size_t i) const {
  return lock::semaphore_slot(name_, i);
}

std::string Semaphore::slot_name(std::string_view name, std::size_t i) {
  return lock::semaphore_slot(name, i);
}

Result<Lease> Semaphore::try_acquire_lease() {
  return acquire_lease(Millis(0));
}

Result<Lease> Semaphore::acquire_lease(Millis wait, std::stop_token stop) {
  const auto& core = detail::Access::core(client_);
  const auto started = detail::observe_start(*core);
  detail::Rounds rounds;
  auto result = acquire_permit(core, name_, permits_, options_, wait, std::move(stop), rounds);
  detail::report_acquire(*core, name_, result, started, rounds);
  return result;
}

Result<void> Semaphore::keep(Result<Lease> lease) {
  if (!lease) return std::move(lease).error();
  std::lock_guard lock(mu_);
  held_.push_back(std::move(*lease));
  return {};
}

Result<void> Semaphore::acquire() {
  for (;;) {
    // Waits of a day at a time: a wait that ran out is not an error here.
    auto got = acquire_within(std::chrono::hours(24));
    if (got || !got.error().is(errc::wait_timeout)) return got;
  }
}

Result<void> Semaphore::try_acquire() {
  return keep(try_acquire_lease());
}

Result<void> Semaphore::acquire_within(std::chrono::milliseconds wait) {
  return keep(acquire_lease(std::max(wait, std::chrono::milliseconds(0))));
}

Result<void> Semaphore::release() {
  Lease lease;
  {
    std::lock_guard lock(mu_);
    if (held_.empty()) {
      return Error(errc::not_owner, "semaphore '" + name_ + "': this Semaphore holds no permit");
    }
    lease = std::move(held_.back());
    held_.pop_back();
  }
  return lease.unlock();
}

std::size_t Semaphore::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

}  // namespace dlock

// SPDX-License-Identifier: MIT
#include "core/operations.h"

#include <algorithm>
#include <chrono>

#include "core/access.h"
#include "engine/run.h"
#include "lock/keys.h"
#include "lock/owner.h"

namespace dlock::detail {
namespace {

using Status = LeaseState::Status;
using SteadyClock = std::chrono::steady_clock;

std::int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::optional<Error> check_options(const ClientCore& core, std::string_view name,
                                   const LockOptions& options) {
  if (auto bad = core.check(name, options.ttl)) return bad;
  if (options.owner && options.owner->empty()) {
    return Error(errc::invalid_argument, "owner must not be empty");
  }
  if (options.renew_every.count() < 0 ||
      (options.auto_renew && options.renew_every >= options.ttl)) {
    return Error(errc::invalid_argument, "renew_every must be shorter than the ttl");
  }
  if (options.fair && options.fair_waiter_timeout.count() < 3) {
    return Error(errc::invalid_argument, "fair_waiter_timeout must be at least 3 ms");
  }
  if (options.retry_delay.count() < 0 || options.retry_delay > kMaxTimeout) {
    return Error(errc::invalid_argument, "retry_delay must be between 0 and 1 h");
  }
  if (options.fair && options.fair_waiter_timeout > kMaxTtl) {
    return Error(errc::invalid_argument, "fair_waiter_timeout must be at most 365 days");
  }
  if (options.min_replicas > 0 &&
      (options.replica_timeout.count() <= 0 || options.replica_timeout >= core.node_timeout())) {
    return Error(errc::invalid_argument,
                 "replica_timeout must be positive and shorter than the node timeout (" +
                     std::to_string(core.node_timeout().count()) + " ms)");
  }
  return std::nullopt;
}

void report_acquire(const ClientCore& core, std::string_view name, const Result<Lease>& result,
                    SteadyClock::time_point started, const Rounds& rounds) {
  Observer* observer = core.observer();
  if (observer == nullptr) return;
  AcquireOutcome outcome = AcquireOutcome::acquired;
  if (!result) {
    const Error& e = result.error();
    outcome = e.is(errc::invalid_argument) ? AcquireOutcome::invalid
              : e.is(errc::cancelled)      ? AcquireOutcome::cancelled
              : is_contention(e.code())    ? AcquireOutcome::contention
                                           : AcquireOutcome::unavailable;
  }
  observer->acquired(AcquireEvent{name, outcome, SteadyClock::now() - started, rounds.sent.load(),
                                  rounds.contended.load()});
}

OwnerToken owner_for(const LockOptions& options) {
  return options.owner ? *options.owner : lock::thread_owner();
}

std::optional<lock::FairTicket> fair_ticket(const LockOptions& options, bool enqueue) {
  if (!options.fair) return std::nullopt;
  return lock::FairTicket{wall_clock_ms(), options.fair_waiter_timeout, enqueue};
}

bool drop_lapsed(std::optional<Lease>& lease) {
  if (!lease || lease->validity().count() > 0) return false;
  lease.reset();
  return true;
}

Result<Lease> hand_over(Lease lease, const std::string& name) {
  if (lease.validity().count() > 0) return lease;
  return Error(errc::timeout, "lock '" + name +
                                  "': acquired, but its validity ran out before the wait "
                                  "ended (released)");
}

std::optional<Error> check_shared(const LockOptions& options) {
  if (options.fair) {
    return Error(errc::invalid_argument,
                 "fair mode orders writers only: a read lock cannot be fair (readers already "
                 "give way to waiting writers)");
  }
  return std::nullopt;
}

lock::WriterWait writer_wait(const LockOptions& options, lock::HoldKind kind, bool can_wait) {
  if (kind != lock::HoldKind::write || !can_wait || options.fair) return {};
  return lock::WriterWait{std::clamp<std::chrono::milliseconds>(
                              options.fair_waiter_timeout, std::chrono::milliseconds(3), kMaxTtl),
                          false};
}

engine::Task<std::variant<Lease, lock::Refused>> attempt_task(
    std::shared_ptr<ClientCore> core, std::string name, LockOptions options, OwnerToken owner,
    std::optional<lock::FairTicket> fair, bool thread_bound, lock::HoldKind kind,
    lock::WriterWait writer, std::size_t permits) {
  auto state = std::make_shared<LeaseState>();
  state->ttl = options.ttl;
  state->auto_renew = options.auto_renew;
  state->renew_every = options.renew_every.count() > 0
                           ? options.renew_every
                           : std::max(std::chrono::milliseconds(1), options.ttl / 3);
  state->on_lost = std::move(options.on_lost);  // read nowhere else here
  if (thread_bound) state->thread_alive = this_thread_alive();

  const lock::ReplicaGuard guard{options.min_replicas, options.replica_timeout};
  auto acquiring = core->holds().acquire_task(state, std::move(name), std::move(owner), options.ttl,
                                              fair, kind, writer, guard, permits);
  if (auto refused = co_await std::move(acquiring)) co_return std::move(*refused);
  {
    std::lock_guard lock(state->mu);
    state->renewed_at = SteadyClock::now();
    state->acquired_at = state->renewed_at;
  }
  core->watchdog().track(state);
  co_return Access::make_lease(core, std::move(state));
}

LockAttempts::LockAttempts(std::shared_ptr<ClientCore> core, std::string name, LockOptions options,
                           OwnerToken owner, std::optional<lock::FairTicket> fair,
                           lock::HoldKind kind, lock::WaitOn on, Rounds& rounds)
    : core_(std::move(core)),
      name_(std::move(name)),
      options_(std::move(options)),
      owner_(std::move(owner)),
      fair_(std::move(fair)),
      kind_(kind),
      on_(on),
      rounds_(rounds) {}

engine::Task<std::optional<lock::Refusal>> LockAttempts::attempt(lock::WriterWait writer) {
  ++rounds_.sent;
  const bool blocking = on_ == lock::WaitOn::caller_thread;
  auto attempting = attempt_task(core_, name_, options_, owner_, fair_, blocking && !options_.owner,
                                 kind_, writer);
  std::variant<Lease, lock::Refused> result;
  if (blocking) {
    // Blocks this thread, never the io thread: the wait runs on the caller's (lock/wait.h).
    result = engine::run_sync(std::move(attempting));
  } else {
    result = co_await std::move(attempting);
  }
  if (auto* got = std::get_if<Lease>(&result)) {
    lease = std::move(*got);
    co_return std::nullopt;
  }
  auto& refused = std::get<lock::Refused>(result);
  rounds_.refused(refused.error);
  co_return lock::refusal_of(std::move(refused));
}

lock::WaitPlan lock_wait_plan(ClientCore& core, const std::string& name,
                              std::chrono::milliseconds wait, const LockOptions& options,
                              const OwnerToken& owner, const std::optional<lock::FairTicket>& fair,
                              lock::HoldKind kind) {
  lock::WaitPlan plan;
  plan.deadline = SteadyClock::now() + std::min<std::chrono::milliseconds>(wait, kMaxWait);
  plan.waits = wait.count() > 0;
  // Fair mode needs no hand-off grace: its queue decides who is next.
  if (!fair && plan.waits) plan.hold_back_until = core.hand_off().hold_back_until(name);
  plan.name = name;
  plan.wake_for = fair ? owner.str() : "";
  plan.wakes_on_every = kind == lock::HoldKind::read;
  plan.queue_owner = owner;
  plan.queued = fair.has_value();
  plan.writer = writer_wait(options, kind, plan.waits);
  plan.nap.retry_delay = options.retry_delay;
  if (fair) plan.nap.queue_timeout = options.fair_waiter_timeout;
  plan.timeout = lock::TimeoutText{"lock '", name, "' still held by another owner after ", wait};
  return plan;
}

lock::WaitContext wait_context(ClientCore& core, lock::WaitOn on) {
  return lock::WaitContext{on, core.waiters(), core.algorithm(), core.nodes().io()};
}

std::optional<Error> check_owned(const ClientCore& core, std::string_view name,
                                 const OwnerToken& owner,
                                 std::optional<std::chrono::milliseconds> ttl) {
  if (auto bad = ClientCore::check_name(name)) return bad;
  if (owner.empty()) return Error(errc::invalid_argument, "owner must not be empty");
  if (ttl) return core.check(name, *ttl);
  return std::nullopt;
}

engine::Task<Result<void>> unlock_owned_task(std::shared_ptr<ClientCore> core, std::string name,
                                             OwnerToken owner, lock::HoldKind kind) {
  // A named local: release_task reads the hold by reference, and a temporary would die before
  // the Task runs (every by-owner release then read freed memory).
  const lock::HoldId hold{name, owner, "", kind};
  auto releasing = core->algorithm().release_task(hold);
  auto r = co_await std::move(releasing);
  // This client's own leases of that hold, if any, are over: they must not report held.
  auto forgetting = core->holds().forget_task(std::move(name), std::move(owner), kind);
  (void)co_await std::move(forgetting);
  co_return r;
}

engine::Task<Result<Millis>> extend_owned_task(std::shared_ptr<ClientCore> core, std::string name,
                                               OwnerToken owner, std::chrono::milliseconds ttl,
                                               lock::HoldKind kind) {
  // No lease here says how long the hold was valid, so the round may last up to the new ttl:
  // what the nodes re-arm lives ttl from when they answer, all after `start`, and the judge
  // counts the validity from `start`.
  const auto start = lock::Clock::now();
  auto extending = core->algorithm().extend_task(lock::HoldId{name, std::move(owner), "", kind},
                                                 ttl, start + ttl);
  auto until = co_await std::move(extending);
  if (!until) co_return std::move(until).error();
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(*until - lock::Clock::now());
  if (left.count() <= 0) {
    co_return Error(errc::timeout, "lock '" + name + "': extended too late to be valid");
  }
  co_return Millis(left);
}

engine::Task<Result<LockStatus>> status_task(std::shared_ptr<ClientCore> core, std::string name) {
  auto inspecting = core->algorithm().inspect_task(std::move(name));
  co_return co_await std::move(inspecting);
}

std::optional<Error> begin_detach(LeaseState& state) {
  std::lock_guard lock(state.mu);
  if (state.status == Status::released) {
    return Error(errc::not_owner, "lock '" + state.name() + "' was released");
  }
  if (state.status == Status::lost || state.hold->lost.load() ||
      LeaseState::Clock::now() >= state.valid_until) {
    return Error(errc::lock_lost, "lock '" + state.name() + "' was lost or has expired");
  }
  // The watchdog renews only held leases: from here on nothing renews it.
  state.status = Status::released;
  return std::nullopt;
}

engine::Task<bool> detach_task(std::shared_ptr<ClientCore> core,
                               std::shared_ptr<LeaseState> state) {
  auto ending = core->holds().end_task(std::move(state), /*release=*/false);
  (void)co_await std::move(ending);
  co_return true;
}

engine::Task<Result<void>> unlock_task(std::shared_ptr<ClientCore> core,
                                       std::shared_ptr<LeaseState> state) {
  bool expired = false;
  std::optional<Result<void>> again;  // a second unlock(): what the first came to
  {
    // Only the status change is under the lease's mutex: it is never held across a round trip.
    std::lock_guard lock(state->mu);
    if (state->status == Status::released) {
      // A release that failed (BUSY, a timeout) is not reported done when the caller retries:
      // the key lives until its ttl (ManagedBusyTest: the retry said released before).
      again = state->unlock_failed ? Result<void>(*state->unlock_failed) : Result<void>{};
    } else {
      expired = state->status == Status::lost || state->hold->lost.load() ||
                LeaseState::Clock::now() >= state->valid_until;
      state->status = Status::released;
    }
  }
  if (again) co_return std::move(*again);
  // The hold's last lease releases it on all nodes, even when expired: nodes that still know
  // it must not keep the key. Reentrant leases before the last change nothing on the nodes.
  const auto started = LeaseState::Clock::now();
  auto ending = core->holds().end_task(state);
  auto ended = co_await std::move(ending);
  const auto& r = ended.released;
  if (ended.last && r && !expired && ended.listeners > 0) {
    // Someone else was listening (our own subscription, if any, is one of the listeners): let
    // a waiter have it before this client takes it back (lock/hand_off.h).
    const auto local = core->waiters().listening(lock::release_channel(state->name()));
    if (ended.listeners > (local.subscribed ? 1u : 0u) || local.waiters > 0) {
      core->hand_off().released(state->name(), LeaseState::Clock::now() - started);
    }
  }
  Result<void> out = r;
  if (expired || (!r && r.error().is(errc::not_owner))) {
    out = Error(errc::lock_lost, "lock '" + state->name() + "' had expired before release",
                r ? std::vector<NodeError>{} : r.error().nodes());
  }
  if (!r) {
    std::lock_guard lock(state->mu);
    state->unlock_failed = out.error();
  }
  if (Observer* observer = core->observer()) {
    observer->released(ReleaseEvent{state->name(), LeaseState::Clock::now() - state->acquired_at,
                                    out.has_value()});
  }
  co_return out;
}

namespace {

// Under state.mu. `made_lost` (may be null) is set when this call is what found the lease
// lost (its status went from held to lost here): only that is reported as a lost lock, once.
void mark_lost(LeaseState& state, bool* made_lost) {
  if (made_lost != nullptr && state.status == Status::held) *made_lost = true;
  state.status = Status::lost;
}

// Under state.mu, after the extension's round: what it came to.
Result<void> settle_extension(LeaseState& state, Result<LeaseState::Clock::time_point> r,
                              bool* made_lost) {
  const auto now = LeaseState::Clock::now();  // under the mutex: validity can only end before
  if (state.status == Status::released) {
    return Error(errc::not_owner, "lock '" + state.name() + "' was released");
  }
  if (state.status == Status::lost || state.hold->lost.load()) {
    // Lost meanwhile (the watchdog, or a lease of the same hold, found it gone).
    mark_lost(state, made_lost);
    return Error(errc::lock_lost, "lock '" + state.name() + "' was lost");
  }
  // As in the watchdog: validity that ended meanwhile is final (the same owner may have taken
  // a new hold since), whatever the nodes said.
  const bool expired = now >= state.valid_until;
  if (r && !expired) {
    state.valid_until = std::max(state.valid_until, *r);
    return Result<void>{};
  }
  if (!r && r.error().is(errc::lock_lost)) {
    // A quorum said the hold is not there: it is lost, and with it every lease that shares it.
    state.hold->lost.store(true);
    mark_lost(state, made_lost);
    return std::move(r).error();
  }
  if (expired) {
    mark_lost(state, made_lost);  // this lease only: the hold may be there for the others
    return Error(errc::lock_lost, "lock '" + state.name() + "': validity ended",
                 r ? std::vector<NodeError>{} : r.error().nodes());
  }
  if (r.error().is(errc::timeout)) {
    // Judged against a validity that ended, but a later one confirmed by a quorum (the
    // watchdog's renewal meanwhile) still stands: the lease holds until then.
    return Error(errc::quorum_not_reached,
                 "lock '" + state.name() +
                     "': extension judged against an earlier validity; the lease stands",
                 r.error().nodes());
  }
  return std::move(r).error();
}

// `made_lost`: as in mark_lost.
engine::Task<Result<void>> extend_held(std::shared_ptr<ClientCore> core,
                                       std::shared_ptr<LeaseState> state,
                                       std::chrono::milliseconds ttl, bool* made_lost) {
  lock::HoldId id;
  LeaseState::Clock::time_point valid_until;
  {
    std::lock_guard lock(state->mu);
    if (state->status == Status::released) {
      co_return Error(errc::not_owner, "lock '" + state->name() + "' was released");
    }
    if (state->status == Status::lost || state->hold->lost.load()) {
      mark_lost(*state, made_lost);
      co_return Error(errc::lock_lost, "lock '" + state->name() + "' was lost");
    }
    id = state->hold->id;
    valid_until = state->valid_until;
  }
  // No lease mutex across the round trip: the watchdog and other callers go on meanwhile.
  auto extending = core->algorithm().extend_task(std::move(id), ttl, valid_until);
  auto r = co_await std::move(extending);
  std::lock_guard lock(state->mu);
  co_return settle_extension(*state, std::move(r), made_lost);
}

// extend_held, reported to the observer (which is set).
engine::Task<Result<void>> extend_observed(std::shared_ptr<ClientCore> core,
                                           std::shared_ptr<LeaseState> state,
                                           std::chrono::milliseconds ttl) {
  Observer* observer = core->observer();
  bool was_held = false;
  {
    std::lock_guard lock(state->mu);
    was_held = state->status == Status::held && !state->hold->lost.load();
  }
  bool made_lost = false;
  auto extending = extend_held(core, state, ttl, &made_lost);
  auto r = co_await std::move(extending);
  if (was_held) {
    observer->renewed(RenewEvent{state->name(), r.has_value(), /*by_watchdog=*/false});
  }
  if (made_lost) observer->lost(LostEvent{state->name()});
  co_return r;
}

}  // namespace

engine::Task<Result<void>> extend_task(std::shared_ptr<ClientCore> core,
                                       std::shared_ptr<LeaseState> state,
                                       std::chrono::milliseconds ttl) {
  // Without an observer, no second coroutine frame.
  if (core->observer() == nullptr) {
    return extend_held(std::move(core), std::move(state), ttl, nullptr);
  }
  return extend_observed(std::move(core), std::move(state), ttl);
}

}  // namespace dlock::detail

// SPDX-License-Identifier: MIT
// The lease operations as Tasks of the one engine (engine/task.h): the blocking API runs them
// and waits (engine::run_sync), the asio API starts them on the io thread and completes on the
// caller's executor (dlock/async.h). One code path for both.
#pragma once

#include <dlock/lease.h>
#include <dlock/options.h>
#include <dlock/result.h>
#include <dlock/status.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "core/client_core.h"
#include "engine/task.h"
#include "lock/lease_state.h"
#include "lock/quorum_lock.h"
#include "lock/wait.h"

namespace dlock::detail {

// Checks a lock's options against the client's (name, ttl, owner, renewal, fair mode).
std::optional<Error> check_options(const ClientCore& core, std::string_view name,
                                   const LockOptions& options);

// The owner a lock call uses: options.owner, or the calling thread's default owner.
OwnerToken owner_for(const LockOptions& options);

// A fair ticket for a call starting now (nullopt unless options.fair).
std::optional<lock::FairTicket> fair_ticket(const LockOptions& options, bool enqueue);

// When an acquisition starts, for report_acquire: the clock is read only for an observer.
inline std::chrono::steady_clock::time_point observe_start(const ClientCore& core) {
  return core.observer() != nullptr ? std::chrono::steady_clock::now()
                                    : std::chrono::steady_clock::time_point{};
}

// The rounds an acquisition sent, and how many of them found the lock held by another owner,
// for the observer. Atomic: an asio completion may read them on a cancelling thread while the
// io thread still counts.
struct Rounds {
  std::atomic<std::size_t> sent{0};
  std::atomic<std::size_t> contended{0};
  void refused(const Error& e) {
    if (e.is(errc::lock_held)) contended.fetch_add(1, std::memory_order_relaxed);
  }
};

// Tells the client's observer, if any, how an acquisition that started at `started` ended.
void report_acquire(const ClientCore& core, std::string_view name, const Result<Lease>& result,
                    std::chrono::steady_clock::time_point started, const Rounds& rounds);

// One attempt; a held lock becomes a Lease tracked by the watchdog. `thread_bound`: the owner
// is the calling thread's (renewal stops when that thread exits). `kind`: a write (exclusive)
// or read (shared) hold; `writer`: a waiting writer's registration (lock/quorum_lock.h);
// `permits`: for a semaphore's slot, its permit count (checked against the nodes' record).
engine::Task<std::variant<Lease, lock::Refused>> attempt_task(
    std::shared_ptr<ClientCore> core, std::string name, LockOptions options, OwnerToken owner,
    std::optional<lock::FairTicket> fair, bool thread_bound,
    lock::HoldKind kind = lock::HoldKind::write, lock::WriterWait writer = {},
    std::size_t permits = 0);
// What a wait that acquired hands its caller: `lease`, or, when its validity ran out after the
// attempt that got it (the wait's end settles with the membership, whose lock a greeting may
// hold while it waits for a slow node), errc::timeout; the lease is then dropped, which
// releases it. A lease is never handed over with no validity left (found by the chaos runner).
Result<Lease> hand_over(Lease lease, const std::string& name);
// Attempts::drop_lapsed for a wait's `lease`: drops (releases) it if its validity ran out.
bool drop_lapsed(std::optional<Lease>& lease);
// A read hold's extra rules: no fair mode (the fair queue orders writers only).
std::optional<Error> check_shared(const LockOptions& options);
// How a waiting writer registers (nothing for a read hold, a try, or fair mode, which queues).
lock::WriterWait writer_wait(const LockOptions& options, lock::HoldKind kind, bool can_wait);

// A lock's attempts for the wait (lock/wait.h): one acquisition each, blocking on the caller's
// thread (engine::run_sync; the owner is thread-bound unless options.owner names one) or
// awaited on the io thread. Counts them in `rounds`, which must outlive the wait.
class LockAttempts final : public lock::Attempts {
 public:
  LockAttempts(std::shared_ptr<ClientCore> core, std::string name, LockOptions options,
               OwnerToken owner, std::optional<lock::FairTicket> fair, lock::HoldKind kind,
               lock::WaitOn on, Rounds& rounds);
  engine::Task<std::optional<lock::Refusal>> attempt(lock::WriterWait writer) override;
  bool drop_lapsed() override { return detail::drop_lapsed(lease); }

  std::optional<Lease> lease;  // what the attempt that acquired got

 private:
  const std::shared_ptr<ClientCore> core_;
  const std::string name_;
  const LockOptions options_;
  const OwnerToken owner_;
  const std::optional<lock::FairTicket> fair_;
  const lock::HoldKind kind_;
  const lock::WaitOn on_;
  Rounds& rounds_;
};

// How Client::lock, lock_shared and async_lock wait for `name` as `owner`, with `fair` the
// call's fair ticket (it must be the one its attempts use).
lock::WaitPlan lock_wait_plan(ClientCore& core, const std::string& name,
                              std::chrono::milliseconds wait, const LockOptions& options,
                              const OwnerToken& owner, const std::optional<lock::FairTicket>& fair,
                              lock::HoldKind kind);
// What a wait on this client's thread `on` needs of it.
lock::WaitContext wait_context(ClientCore& core, lock::WaitOn on);

// A permit of the semaphore `name` on the io thread (dlock/async.h's async_acquire_permit;
// src/recipes/semaphore.cc): the wait of Semaphore::acquire_lease, awaited. check_permit first.
engine::Task<Result<Lease>> permit_task(std::shared_ptr<ClientCore> core, std::string name,
                                        std::size_t permits, std::chrono::milliseconds wait,
                                        LockOptions options,
                                        std::shared_ptr<lock::WaitCancel> cancel,
                                        std::shared_ptr<Rounds> rounds);
std::optional<Error> check_permit(const ClientCore& core, const std::string& name,
                                  std::size_t permits, const LockOptions& options,
                                  std::chrono::milliseconds wait);

// Client::unlock / unlock_shared and Client::extend / extend_shared: a hold by its owner's name
// (a lock handed over across threads or processes). Check first with check_owned.
std::optional<Error> check_owned(const ClientCore& core, std::string_view name,
                                 const OwnerToken& owner,
                                 std::optional<std::chrono::milliseconds> ttl = std::nullopt);
engine::Task<Result<void>> unlock_owned_task(std::shared_ptr<ClientCore> core, std::string name,
                                             OwnerToken owner, lock::HoldKind kind);
engine::Task<Result<Millis>> extend_owned_task(std::shared_ptr<ClientCore> core, std::string name,
                                               OwnerToken owner, std::chrono::milliseconds ttl,
                                               lock::HoldKind kind);
// Client::status.
engine::Task<Result<LockStatus>> status_task(std::shared_ptr<ClientCore> core, std::string name);

// Lease::detach: marks the lease released (nothing renews it from here on), or says why it
// cannot be handed over; then detach_task makes the client forget the hold without touching
// the nodes.
std::optional<Error> begin_detach(LeaseState& state);
engine::Task<bool> detach_task(std::shared_ptr<ClientCore> core, std::shared_ptr<LeaseState> state);

// Lease::unlock and Lease::extend.
engine::Task<Result<void>> unlock_task(std::shared_ptr<ClientCore> core,
                                       std::shared_ptr<LeaseState> state);
engine::Task<Result<void>> extend_task(std::shared_ptr<ClientCore> core,
                                       std::shared_ptr<LeaseState> state,
                                       std::chrono::milliseconds ttl);

}  // namespace dlock::detail

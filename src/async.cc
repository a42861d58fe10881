// SPDX-License-Identifier: MIT
// The library side of dlock/async.h: each operation is the blocking API's Task
// (operations.h), started on the client's io thread instead of waited for.
#include <dlock/async.h>

#include "access.h"
#include "client_core.h"
#include "engine/task.h"
#include "lock/keys.h"
#include "lock/owner.h"
#include "lock/waiters.h"
#include "operations.h"

namespace dlock::detail {

namespace {

// Completes an operation once: with its outcome, or earlier with errc::cancelled. An outcome
// that comes after the cancellation is dropped, and a Lease in it released as it is destroyed
// (on the io thread: Lease::unlock then sends the release without waiting).
template <typename T>
class Once {
 public:
  explicit Once(std::function<void(Result<T>)> done) : done_(std::move(done)) {}
  bool complete(Result<T> result) {
    if (finished_.exchange(true, std::memory_order_acq_rel)) return false;
    auto done = std::move(done_);
    done(std::move(result));
    return true;
  }

 private:
  std::atomic<bool> finished_{false};
  std::function<void(Result<T>)> done_;
};

Error cancelled() {
  return Error(errc::cancelled, "operation cancelled");
}

template <typename T>
std::shared_ptr<Once<T>> once_cancellable(const std::shared_ptr<AsyncCancel>& cancel,
                                          std::function<void(Result<T>)> done) {
  auto once = std::make_shared<Once<T>>(std::move(done));
  // Runs on the thread that asked for the cancellation: completing only posts to the caller's
  // executor, so it may run there.
  cancel->on_request([weak = std::weak_ptr<Once<T>>(once)] {
    if (auto o = weak.lock()) o->complete(cancelled());
  });
  return once;
}

engine::Task<bool> try_lock_task(std::shared_ptr<ClientCore> core, std::string name,
                                 LockOptions options, std::shared_ptr<AsyncCancel> cancel,
                                 std::shared_ptr<Once<Lease>> once,
                                 std::shared_ptr<Rounds> rounds /* may be null */) {
  if (cancel->requested()) co_return once->complete(cancelled());  // before anything was sent
  const OwnerToken owner = options.owner ? *options.owner : lock::task_owner();
  auto fair = fair_ticket(options, false);
  if (rounds) ++rounds->sent;
  auto attempt =
      attempt_task(core, std::move(name), std::move(options), owner, std::move(fair), false);
  auto result = co_await std::move(attempt);
  if (auto* lease = std::get_if<Lease>(&result)) co_return once->complete(std::move(*lease));
  if (rounds) rounds->refused(std::get<lock::Refused>(result).error);
  co_return once->complete(std::move(std::get<lock::Refused>(result).error));
}

// The waiter a cancellation must wake: the one the operation waits on now.
class CurrentWaiter {
 public:
  // A cancellation that came already (or comes later) cancels `waiter` too.
  void set(std::shared_ptr<lock::Waiter> waiter) {
    std::lock_guard lock(mu_);
    waiter_ = std::move(waiter);
    if (cancelled_ && waiter_) waiter_->cancel();
  }
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (waiter_) waiter_->cancel();
  }
  bool cancelled() {
    std::lock_guard lock(mu_);
    return cancelled_;
  }
  Rounds rounds;  // for the observer

 private:
  std::mutex mu_;
  std::shared_ptr<lock::Waiter> waiter_;
  bool cancelled_ = false;
};

// Client::lock's loop (client.cc) for the io thread: the same steps, with the waits and the
// subscription rounds awaited instead of blocked on.
engine::Task<Result<Lease>> lock_task(std::shared_ptr<ClientCore> core, std::string name,
                                      std::chrono::milliseconds wait, LockOptions options,
                                      std::shared_ptr<CurrentWaiter> current) {
  using SteadyClock = std::chrono::steady_clock;
  const auto deadline = SteadyClock::now() + std::min<std::chrono::milliseconds>(wait, kMaxWait);
  const OwnerToken owner = options.owner ? *options.owner : lock::task_owner();
  const bool can_wait = wait.count() > 0;
  const std::optional<lock::FairTicket> fair = fair_ticket(options, can_wait);
  lock::WriterWait writer = writer_wait(options, lock::HoldKind::write, can_wait);
  auto& io = core->nodes().io();
  const std::string channel = lock::release_channel(name);

  if (!fair && can_wait) {
    if (auto until = core->hand_off().hold_back_until(name)) {
      // This client just freed `name` while others waited: let one of them have it first. The
      // whole grace, whatever releases come meanwhile (lock/hand_off.h says why); the waiter is
      // not registered anywhere: only a cancellation or the timer ends the wait.
      auto polite = std::make_shared<lock::Waiter>(channel, "");
      current->set(polite);
      lock::WaitUntil grace(polite, std::min(*until, deadline), io);
      (void)co_await grace;
      current->set(nullptr);
      if (current->cancelled()) co_return Error(errc::cancelled, "wait cancelled");
    }
  }

  // Cancelled before anything was sent: do not take the lock at all.
  if (current->cancelled()) co_return Error(errc::cancelled, "wait cancelled");
  std::shared_ptr<lock::Waiter> waiter;
  ++current->rounds.sent;
  auto first = attempt_task(core, name, options, owner, fair, false, lock::HoldKind::write, writer);
  auto result = co_await std::move(first);
  bool lost_race = false;
  std::optional<Error> failed;
  while (!failed) {
    if (auto* lease = std::get_if<Lease>(&result)) {
      if (waiter) core->waiters().leave(waiter);
      co_return std::move(*lease);
    }
    auto& refused = std::get<lock::Refused>(result);
    current->rounds.refused(refused.error);
    // A refused waiting writer may now be registered on some nodes (readers held the lock).
    writer.registered = writer.registered || refused.writer_registered;
    const bool retryable = refused.error.is(errc::lock_held) ||
                           refused.error.is(errc::quorum_not_reached) ||
                           refused.error.is(errc::timeout);
    const auto now = SteadyClock::now();
    if (!retryable) {
      failed = std::move(refused.error);
    } else if (current->cancelled()) {
      failed = Error(errc::cancelled, "wait cancelled");
    } else if (!can_wait || now >= deadline) {
      failed = refused.error.is(errc::lock_held) && can_wait
                   ? Error(errc::wait_timeout,
                           "lock '" + name + "' still held by another owner after " +
                               std::to_string(wait.count()) + " ms",
                           refused.error.nodes())
                   : std::move(refused.error);
    }
    if (failed) break;
    if (!waiter) {
      // Listen before trying again, so a release in between is not missed.
      auto entering = core->waiters().enter_task(channel, fair ? owner.str() : "");
      waiter = co_await std::move(entering);
      current->set(waiter);
    } else {
      // Sleep until a release wakes us, or the holder's key has expired; after a lost race
      // add jitter so competing waiters spread out.
      auto nap = refused.error.is(errc::lock_held) && refused.holder_ttl
                     ? *refused.holder_ttl + std::chrono::milliseconds(1)
                     : options.retry_delay;
      if (lost_race || !refused.holder_ttl) nap += jitter(options.retry_delay);
      if (fair) nap = std::min(nap, options.fair_waiter_timeout / 3);  // check in with the queue
      // A writer registered as waiting for readers comes back before its registration runs out,
      // whatever another node said of its holder (a longer pttl would let readers in meanwhile).
      if (writer.registered) nap = std::min(nap, writer.register_for / 3);
      lock::WaitUntil sleep(waiter, std::min(deadline, SteadyClock::now() + nap), io);
      lost_race = co_await sleep;
      if (waiter->cancelled()) {
        failed = Error(errc::cancelled, "wait cancelled");
        break;
      }
    }
    waiter->reset();
    ++current->rounds.sent;
    auto again =
        attempt_task(core, name, options, owner, fair, false, lock::HoldKind::write, writer);
    result = co_await std::move(again);
  }
  // Gave up: leave the queue (or the waiting writers) and the channel, so nothing of this wait
  // stays behind.
  if (fair || writer.registered) {
    auto leaving = core->algorithm().leave_queue_task(name, owner);
    co_await std::move(leaving);
  }
  if (waiter) core->waiters().leave(waiter);
  current->set(nullptr);
  co_return std::move(*failed);
}

}  // namespace

void start_lock(const Client& client, std::string name, std::chrono::milliseconds wait,
                LockOptions options, std::shared_ptr<AsyncCancel> cancel,
                std::function<void(Result<Lease>)> done) {
  const auto& core = Access::core(client);
  auto current = std::make_shared<CurrentWaiter>();
  if (core->observer() != nullptr) {
    done = [core, name, current, started = std::chrono::steady_clock::now(),
            done = std::move(done)](Result<Lease> r) {
      report_acquire(*core, name, r, started, current->rounds);
      done(std::move(r));
    };
  }
  if (wait.count() < 0) return done(Error(errc::invalid_argument, "wait must not be negative"));
  if (auto bad = check_options(*core, name, options)) return done(std::move(*bad));
  auto once = std::make_shared<Once<Lease>>(std::move(done));
  // Cancelling completes at once and wakes the wait, which then leaves its queue place and
  // its channel; a lock got meanwhile is released as the Task ends (Once drops it).
  cancel->on_request([weak = std::weak_ptr<Once<Lease>>(once), current] {
    current->cancel();
    if (auto o = weak.lock()) o->complete(cancelled());
  });
  core->nodes().post(
      [core, name = std::move(name), wait, options = std::move(options), current, once] {
        engine::start(lock_task(core, name, wait, options, current),
                      [once](Result<Lease> r) { once->complete(std::move(r)); });
      });
}

void start_try_lock(const Client& client, std::string name, LockOptions options,
                    std::shared_ptr<AsyncCancel> cancel, std::function<void(Result<Lease>)> done) {
  const auto& core = Access::core(client);
  std::shared_ptr<Rounds> rounds;  // counted for an observer only
  if (core->observer() != nullptr) {
    rounds = std::make_shared<Rounds>();
    done = [core, name, rounds, started = std::chrono::steady_clock::now(),
            done = std::move(done)](Result<Lease> r) {
      report_acquire(*core, name, r, started, *rounds);
      done(std::move(r));
    };
  }
  if (auto bad = check_options(*core, name, options)) return done(std::move(*bad));
  auto once = once_cancellable<Lease>(cancel, std::move(done));
  core->nodes().post(
      [core, name = std::move(name), options = std::move(options), cancel, once, rounds] {
        engine::start(try_lock_task(core, name, options, cancel, once, rounds), [](bool) {});
      });
}

void start_unlock(Lease& lease, std::shared_ptr<AsyncCancel> cancel,
                  std::function<void(Result<void>)> done) {
  const auto& core = Access::core(lease);
  const auto& state = Access::state(lease);
  if (!state) return done(Error(errc::invalid_argument, "lease is empty (moved from)"));
  auto once = once_cancellable<void>(cancel, std::move(done));
  // Cancelling does not stop the release: it is sent all the same.
  core->nodes().post([core, state, once] {
    engine::start(unlock_task(core, state),
                  [once](Result<void> r) { once->complete(std::move(r)); });
  });
}

void start_extend(Lease& lease, std::chrono::milliseconds ttl, std::shared_ptr<AsyncCancel> cancel,
                  std::function<void(Result<void>)> done) {
  const auto& core = Access::core(lease);
  const auto& state = Access::state(lease);
  if (!state) return done(Error(errc::invalid_argument, "lease is empty (moved from)"));
  if (auto bad = core->check(state->name(), ttl)) return done(std::move(*bad));
  auto once = once_cancellable<void>(cancel, std::move(done));
  core->nodes().post([core, state, ttl, cancel, once] {
    if (cancel->requested()) return (void)once->complete(cancelled());
    engine::start(extend_task(core, state, ttl),
                  [once](Result<void> r) { once->complete(std::move(r)); });
  });
}

std::chrono::milliseconds lease_ttl(const Lease& lease) {
  return lease.ttl();
}

}  // namespace dlock::detail

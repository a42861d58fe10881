// SPDX-License-Identifier: MIT
#include "lock/wait.h"

#include <algorithm>
#include <random>

#include "engine/run.h"
#include "lock/keys.h"

namespace dlock::lock {

using std::chrono::milliseconds;

bool retryable(const Error& e) {
  return e.is(errc::lock_held) || e.is(errc::quorum_not_reached) || e.is(errc::timeout);
}

Refusal refusal_of(Refused refused) {
  const bool held = refused.error.is(errc::lock_held);
  return Refusal{std::move(refused.error), held, refused.holder_ttl, refused.writer_registered};
}

std::optional<Error> next_step(const Error& refused, bool cancelled, bool waits, bool out_of_time,
                               const std::string& timeout_message) {
  if (!retryable(refused)) return refused;
  if (cancelled) return Error(errc::cancelled, "wait cancelled");
  if (!waits || out_of_time) {
    // Contention past the wait is the wait's own error; anything else (too few nodes) stays
    // what it was, so callers can tell a busy lock from a broken cluster.
    if (refused.is(errc::lock_held) && waits) {
      Error timed_out(errc::wait_timeout, timeout_message, refused.nodes());
      timed_out.set_holder_ttl(refused.holder_ttl());
      return timed_out;
    }
    return refused;
  }
  return std::nullopt;
}

milliseconds next_nap(const Refusal& last, bool lost_race, const WriterWait& writer,
                      const NapPolicy& policy, milliseconds jitter) {
  milliseconds nap =
      last.contended && last.holder_ttl ? *last.holder_ttl + milliseconds(1) : policy.retry_delay;
  if (policy.jitter_every_nap || lost_race || !last.holder_ttl) nap += jitter;
  if (policy.queue_timeout) nap = std::min(nap, *policy.queue_timeout / 3);
  if (writer.registered) nap = std::min(nap, writer.register_for / 3);
  return nap;
}

milliseconds jitter(milliseconds base) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const auto b = std::max<milliseconds::rep>(base.count(), 1);
  std::uniform_int_distribution<milliseconds::rep> dist(0, b);
  return milliseconds(dist(rng));
}

std::string TimeoutText::str() const {
  return before + subject + after + std::to_string(wait.count()) + " ms";
}

void WaitCancel::set(std::shared_ptr<Waiter> waiter) {
  std::lock_guard lock(mu_);
  waiter_ = std::move(waiter);
  if (cancelled_ && waiter_) waiter_->cancel();
}

void WaitCancel::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  if (waiter_) waiter_->cancel();
}

bool WaitCancel::cancelled() {
  std::lock_guard lock(mu_);
  return cancelled_;
}

namespace {

Error cancelled_error() {
  return Error(errc::cancelled, "wait cancelled");
}

// One wait's state. Its steps are Tasks; on the caller's thread none of them suspends.
class Wait {
 public:
  Wait(WaitPlan plan, WaitContext context, Attempts& attempts, WaitCancel& cancel)
      : plan_(std::move(plan)),
        context_(context),
        attempts_(attempts),
        cancel_(cancel),
        writer_(plan_.writer) {}

  engine::Task<Result<void>> run();

 private:
  bool on_caller_thread() const { return context_.on == WaitOn::caller_thread; }
  engine::Task<Result<void>> run_attempts();
  engine::Task<bool> hold_back(WaitClock::time_point until);
  engine::Task<bool> listen();
  engine::Task<bool> nap(const Refusal& last);
  engine::Task<bool> sleep(std::shared_ptr<Waiter> waiter, WaitClock::time_point until);
  engine::Task<bool> leave();

  const WaitPlan plan_;
  const WaitContext context_;
  Attempts& attempts_;
  WaitCancel& cancel_;
  WriterWait writer_;               // the registration so far
  std::shared_ptr<Waiter> waiter_;  // once listening
  bool lost_race_ = false;          // the last nap was ended by a release, yet refused
};

engine::Task<Result<void>> Wait::run() {
  // Announcements of refused attempts are kept for the next attempt until the wait ends.
  context_.lock.begin_wait();
  auto waiting = run_attempts();
  Result<void> result = co_await std::move(waiting);
  auto ending = context_.lock.end_wait_task();
  (void)co_await std::move(ending);
  co_return result;
}

engine::Task<Result<void>> Wait::run_attempts() {
  if (plan_.hold_back_until) {
    auto grace = hold_back(*plan_.hold_back_until);
    (void)co_await std::move(grace);
    if (cancel_.cancelled()) co_return cancelled_error();
  }
  auto first = attempts_.attempt(writer_);
  std::optional<Refusal> refused = co_await std::move(first);
  while (refused) {
    writer_.registered = writer_.registered || refused->writer_registered;
    writer_.waited = true;  // the next attempts' grants are flagged (lock/calls.h)
    const bool out_of_time = WaitClock::now() >= plan_.deadline;
    std::optional<Error> final =
        next_step(refused->error, cancel_.cancelled(), plan_.waits, out_of_time,
                  plan_.waits && out_of_time ? plan_.timeout.str() : std::string());
    if (!final) {
      auto ready = waiter_ ? nap(*refused) : listen();
      if (!co_await std::move(ready)) final = cancelled_error();
    }
    if (final) {
      auto leaving = leave();
      (void)co_await std::move(leaving);
      co_return std::move(*final);
    }
    waiter_->reset();
    auto again = attempts_.attempt(writer_);
    refused = co_await std::move(again);
  }
  if (waiter_) context_.waiters.leave(waiter_);
  cancel_.set(nullptr);  // a cancellation from now on has nothing to wake
  co_return Result<void>{};
}

// The whole grace, whatever releases come meanwhile (lock/hand_off.h says why): the waiter is
// registered nowhere, only a cancellation or the time ends it.
engine::Task<bool> Wait::hold_back(WaitClock::time_point until) {
  auto polite = std::make_shared<Waiter>(release_channel(plan_.name), "");
  cancel_.set(polite);
  auto grace = sleep(polite, std::min(until, plan_.deadline));
  (void)co_await std::move(grace);
  cancel_.set(nullptr);
  co_return true;
}

// Listens before trying again, so a release in between is not missed. True (a cancellation
// is seen at the next refusal, or wakes the next nap at once).
engine::Task<bool> Wait::listen() {
  if (on_caller_thread()) {
    waiter_ =
        context_.waiters.enter(release_channel(plan_.name), plan_.wake_for, plan_.wakes_on_every);
  } else {
    auto entering = context_.waiters.enter_task(release_channel(plan_.name), plan_.wake_for,
                                                plan_.wakes_on_every);
    waiter_ = co_await std::move(entering);
  }
  cancel_.set(waiter_);
  co_return true;
}

// Sleeps until a release wakes us, the holder's key has expired, or the deadline. False if
// cancelled.
engine::Task<bool> Wait::nap(const Refusal& last) {
  const auto nap_for =
      next_nap(last, lost_race_, writer_, plan_.nap, jitter(plan_.nap.retry_delay));
  auto sleeping = sleep(waiter_, std::min(plan_.deadline, WaitClock::now() + nap_for));
  lost_race_ = co_await std::move(sleeping);
  co_return !waiter_->cancelled();
}

// True if signalled before `until`.
engine::Task<bool> Wait::sleep(std::shared_ptr<Waiter> waiter, WaitClock::time_point until) {
  if (on_caller_thread()) co_return waiter->wait_until(until);
  WaitUntil woken(std::move(waiter), until, context_.io);
  co_return co_await woken;
}

// Gave up: nothing of this wait stays behind, neither its queue place (or waiting writer's
// registration) nor its place on the channel.
engine::Task<bool> Wait::leave() {
  if (plan_.queued || writer_.registered) {
    if (on_caller_thread()) {
      context_.lock.leave_queue(plan_.name, plan_.queue_owner);
    } else {
      auto leaving = context_.lock.leave_queue_task(plan_.name, plan_.queue_owner);
      (void)co_await std::move(leaving);
    }
  }
  if (waiter_) context_.waiters.leave(waiter_);
  cancel_.set(nullptr);
  co_return true;
}

}  // namespace

namespace {

engine::Task<Result<void>> one_wait(WaitPlan plan, WaitContext context, Attempts& attempts,
                                    WaitCancel& cancel) {
  Wait wait(std::move(plan), context, attempts, cancel);
  auto running = wait.run();
  co_return co_await std::move(running);
}

// After a wait that ended: true if it was granted, but the grant lapsed while the wait settled
// (end_wait_task may queue behind a greeting to a slow node) and was dropped, and the wait has
// time left: the caller asked to wait for the lock, not for the first grant. Wait again.
bool wait_again(const Result<void>& ended, const WaitPlan& plan, Attempts& attempts,
                WaitCancel& cancel) {
  return ended && !cancel.cancelled() && WaitClock::now() < plan.deadline && attempts.drop_lapsed();
}

// After the drop (a release, which may itself wait for a slow node): the time or a cancellation
// may have run out meanwhile, and a wait makes one attempt before it looks (review finding).
std::optional<Error> out_after_drop(const WaitPlan& plan, WaitCancel& cancel) {
  if (cancel.cancelled()) return cancelled_error();
  if (WaitClock::now() < plan.deadline) return std::nullopt;
  return Error(errc::timeout, "lock '" + plan.name +
                                  "': acquired, but its validity ran out before the wait "
                                  "ended (released), and the wait's time is out");
}

}  // namespace

engine::Task<Result<void>> wait_task(WaitPlan plan, WaitContext context, Attempts& attempts,
                                     WaitCancel& cancel) {
  for (;;) {
    auto waiting = one_wait(plan, context, attempts, cancel);
    Result<void> ended = co_await std::move(waiting);
    if (!wait_again(ended, plan, attempts, cancel)) co_return ended;
    if (auto out = out_after_drop(plan, cancel)) co_return std::move(*out);
  }
}

Result<void> wait_sync(const WaitPlan& plan, WaitContext context, Attempts& attempts,
                       WaitCancel& cancel) {
  for (;;) {
    // Each wait to its end here: its last step may resume on the io thread (end_wait_task's
    // mutex), where the next wait's blocking attempts must not run.
    Result<void> ended = engine::run_sync(one_wait(plan, context, attempts, cancel));
    if (!wait_again(ended, plan, attempts, cancel)) return ended;
    if (auto out = out_after_drop(plan, cancel)) return std::move(*out);
  }
}

}  // namespace dlock::lock

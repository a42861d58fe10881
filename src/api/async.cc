// SPDX-License-Identifier: MIT
// The library side of dlock/async.h: each operation is the blocking API's Task
// (core/operations.h), started on the client's io thread instead of waited for.
#include <dlock/async.h>

#include <asio/defer.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <vector>

#include "core/access.h"
#include "core/client_core.h"
#include "core/operations.h"
#include "engine/task.h"
#include "engine/thread_role.h"
#include "lock/owner.h"
#include "lock/wait.h"

namespace dlock::detail {

namespace {

Error cancelled() {
  return Error(errc::cancelled, "operation cancelled");
}

// Completes an operation once: with its outcome, or earlier with errc::cancelled. An outcome
// that comes after the cancellation is dropped, and a Lease in it released as it is destroyed
// (on the io thread: Lease::unlock then sends the release without waiting).
template <typename T>
class Once final : public CancelTarget {
 public:
  explicit Once(Done<T> done) : done_(std::move(done)) {}
  bool complete(Result<T> result) {
    if (finished_.exchange(true, std::memory_order_acq_rel)) return false;
    auto done = std::move(done_);
    done(std::move(result));
    return true;
  }
  // Runs on the thread that asked for the cancellation: completing only posts to the caller's
  // executor, so it may run there.
  void cancel_now() override { complete(cancelled()); }

 private:
  std::atomic<bool> finished_{false};
  Done<T> done_;
};

template <typename T>
std::shared_ptr<Once<T>> once_cancellable(const std::shared_ptr<AsyncCancel>& cancel,
                                          Done<T> done) {
  auto once = std::make_shared<Once<T>>(std::move(done));
  // Weakly: the Task holds the operation; a request after it ended finds nothing to complete.
  cancel->on_request(std::weak_ptr<CancelTarget>(once));
  return once;
}

engine::Task<bool> try_lock_task(std::shared_ptr<ClientCore> core, std::string name,
                                 LockOptions options, std::shared_ptr<AsyncCancel> cancel,
                                 std::shared_ptr<Once<Lease>> once,
                                 std::shared_ptr<Rounds> rounds /* may be null */,
                                 lock::HoldKind kind) {
  if (cancel->requested()) co_return once->complete(cancelled());  // before anything was sent
  OwnerToken owner = options.owner ? *options.owner : lock::task_owner();
  auto fair = fair_ticket(options, false);
  if (rounds) ++rounds->sent;
  auto attempt = attempt_task(core, std::move(name), std::move(options), std::move(owner),
                              std::move(fair), false, kind);
  auto result = co_await std::move(attempt);
  if (auto* lease = std::get_if<Lease>(&result)) co_return once->complete(std::move(*lease));
  if (rounds) rounds->refused(std::get<lock::Refused>(result).error);
  co_return once->complete(std::move(std::get<lock::Refused>(result).error));
}

// Client::lock's wait (lock/wait.h) on the io thread: its naps and subscription rounds are
// awaited instead of blocked on.
engine::Task<Result<Lease>> lock_task(std::shared_ptr<ClientCore> core, std::string name,
                                      std::chrono::milliseconds wait, LockOptions options,
                                      std::shared_ptr<lock::WaitCancel> cancel,
                                      std::shared_ptr<Rounds> rounds, lock::HoldKind kind) {
  // Cancelled before anything was sent: do not take the lock at all.
  if (cancel->cancelled()) co_return Error(errc::cancelled, "wait cancelled");
  const OwnerToken owner = options.owner ? *options.owner : lock::task_owner();
  const std::optional<lock::FairTicket> fair = fair_ticket(options, wait.count() > 0);
  LockAttempts attempts(core, name, options, owner, fair, kind, lock::WaitOn::io_thread, *rounds);
  auto waiting = lock::wait_task(lock_wait_plan(*core, name, wait, options, owner, fair, kind),
                                 wait_context(*core, lock::WaitOn::io_thread), attempts, *cancel);
  auto waited = co_await std::move(waiting);
  if (!waited) co_return std::move(waited).error();
  co_return hand_over(std::move(*attempts.lease), name);
}

}  // namespace

void start_lock(const Client& client, std::string name, std::chrono::milliseconds wait,
                LockOptions options, std::shared_ptr<AsyncCancel> cancel, Done<Lease> done,
                bool shared) {
  const auto& core = Access::core(client);
  const auto kind = shared ? lock::HoldKind::read : lock::HoldKind::write;
  auto waiting = std::make_shared<lock::WaitCancel>();
  auto rounds = std::make_shared<Rounds>();
  if (core->observer() != nullptr) {
    done = [core, name, rounds, started = std::chrono::steady_clock::now(),
            done = std::move(done)](Result<Lease> r) mutable {
      report_acquire(*core, name, r, started, *rounds);
      done(std::move(r));
    };
  }
  if (wait.count() < 0) return done(Error(errc::invalid_argument, "wait must not be negative"));
  if (auto bad = check_options(*core, name, options)) return done(std::move(*bad));
  if (shared) {
    if (auto bad = check_shared(options)) return done(std::move(*bad));
  }
  auto once = std::make_shared<Once<Lease>>(std::move(done));
  // Cancelling completes at once and wakes the wait, which then leaves its queue place and
  // its channel; a lock got meanwhile is released as the Task ends (Once drops it).
  cancel->on_request([weak = std::weak_ptr<Once<Lease>>(once), waiting] {
    waiting->cancel();
    if (auto o = weak.lock()) o->complete(cancelled());
  });
  core->add_pending_wait(cancel);
  // Each task gets `core` moved in, so that the token is the last of what the io thread holds
  // of the client: when it goes, the client's last handle may end the client at once.
  core->nodes().post_handler([core = core, name = std::move(name), wait,
                              options = std::move(options), waiting, rounds, once, kind, cancel,
                              token = core->started()]() mutable {
    engine::start(
        lock_task(std::move(core), std::move(name), wait, std::move(options), waiting, rounds,
                  kind),
        // `cancel` lives as long as the wait: the client's last handle cancels through it.
        engine::counted(token, [once, cancel](Result<Lease> r) { once->complete(std::move(r)); }));
  });
}

void start_acquire_permit(const Client& client, std::string name, std::size_t permits,
                          std::chrono::milliseconds wait, LockOptions options,
                          std::shared_ptr<AsyncCancel> cancel, Done<Lease> done) {
  const auto& core = Access::core(client);
  auto waiting = std::make_shared<lock::WaitCancel>();
  auto rounds = std::make_shared<Rounds>();
  if (core->observer() != nullptr) {
    done = [core, name, rounds, started = std::chrono::steady_clock::now(),
            done = std::move(done)](Result<Lease> r) mutable {
      report_acquire(*core, name, r, started, *rounds);
      done(std::move(r));
    };
  }
  if (auto bad = check_permit(*core, name, permits, options, wait)) return done(std::move(*bad));
  auto once = std::make_shared<Once<Lease>>(std::move(done));
  // As start_lock: completes at once, and the wait leaves its queue place and its channel; a
  // permit got meanwhile is given back as the Task ends.
  cancel->on_request([weak = std::weak_ptr<Once<Lease>>(once), waiting] {
    waiting->cancel();
    if (auto o = weak.lock()) o->complete(cancelled());
  });
  core->add_pending_wait(cancel);
  core->nodes().post_handler([core = core, name = std::move(name), permits, wait,
                              options = std::move(options), waiting, rounds, once, cancel,
                              token = core->started()]() mutable {
    engine::start(
        permit_task(std::move(core), std::move(name), permits, wait, std::move(options), waiting,
                    rounds),
        // `cancel` lives as long as the wait: the client's last handle cancels through it.
        engine::counted(token, [once, cancel](Result<Lease> r) { once->complete(std::move(r)); }));
  });
}

void start_try_lock(const Client& client, std::string name, LockOptions options,
                    std::shared_ptr<AsyncCancel> cancel, Done<Lease> done, bool shared) {
  const auto& core = Access::core(client);
  std::shared_ptr<Rounds> rounds;  // counted for an observer only
  if (core->observer() != nullptr) {
    rounds = std::make_shared<Rounds>();
    done = [core, name, rounds, started = std::chrono::steady_clock::now(),
            done = std::move(done)](Result<Lease> r) mutable {
      report_acquire(*core, name, r, started, *rounds);
      done(std::move(r));
    };
  }
  if (auto bad = check_options(*core, name, options)) return done(std::move(*bad));
  if (shared) {
    if (auto bad = check_shared(options)) return done(std::move(*bad));
  }
  auto once = once_cancellable<Lease>(cancel, std::move(done));
  const auto kind = shared ? lock::HoldKind::read : lock::HoldKind::write;
  core->nodes().post_handler([core = core, name = std::move(name), options = std::move(options),
                              cancel, once, rounds, kind, token = core->started()]() mutable {
    // Moved, not copied: the handler runs once (a copy of the options' on_lost and owner, and
    // of a name longer than a std::string keeps in place, each an allocation per acquisition).
    engine::start(try_lock_task(std::move(core), std::move(name), std::move(options), cancel, once,
                                rounds, kind),
                  engine::counted(token, [](bool) {}));
  });
}

void start_unlock(Lease& lease, std::shared_ptr<AsyncCancel> cancel, Done<void> done) {
  const auto& core = Access::core(lease);
  const auto& state = Access::state(lease);
  if (!state) return done(Error(errc::invalid_argument, "lease is empty (moved from)"));
  auto once = once_cancellable<void>(cancel, std::move(done));
  // Cancelling does not stop the release: it is sent all the same.
  core->nodes().post_handler([core = core, state, once, token = core->started()]() mutable {
    engine::start(unlock_task(std::move(core), state),
                  engine::counted(token, [once](Result<void> r) { once->complete(std::move(r)); }));
  });
}

void start_extend(Lease& lease, std::chrono::milliseconds ttl, std::shared_ptr<AsyncCancel> cancel,
                  Done<void> done) {
  const auto& core = Access::core(lease);
  const auto& state = Access::state(lease);
  if (!state) return done(Error(errc::invalid_argument, "lease is empty (moved from)"));
  if (auto bad = core->check(state->name(), ttl)) return done(std::move(*bad));
  auto once = once_cancellable<void>(cancel, std::move(done));
  core->nodes().post_handler([core = core, state, ttl, cancel, once,
                              token = core->started()]() mutable {
    if (cancel->requested()) {
      core.reset();  // before the token goes, whatever the order of the captures
      return (void)once->complete(cancelled());
    }
    engine::start(extend_task(std::move(core), state, ttl),
                  engine::counted(token, [once](Result<void> r) { once->complete(std::move(r)); }));
  });
}

namespace {

// Starts `task` on the io thread; `once` completes with what it returns. Cancelling completes
// at once (once_cancellable) but does not stop what was sent.
template <typename T, typename MakeTask>
void start_owned(const std::shared_ptr<ClientCore>& core, std::shared_ptr<AsyncCancel> cancel,
                 Done<T> done, MakeTask make_task) {
  auto once = once_cancellable<T>(cancel, std::move(done));
  core->nodes().post_handler([core = core, cancel, once, make_task = std::move(make_task),
                              token = core->started()]() mutable {
    if (cancel->requested()) {
      core.reset();  // before the token goes, whatever the order of the captures
      return (void)once->complete(cancelled());
    }
    engine::start(make_task(std::move(core)),
                  engine::counted(token, [once](Result<T> r) { once->complete(std::move(r)); }));
  });
}

}  // namespace

void start_unlock_owned(const Client& client, std::string name, OwnerToken owner, bool shared,
                        std::shared_ptr<AsyncCancel> cancel, Done<void> done) {
  const auto& core = Access::core(client);
  if (auto bad = check_owned(*core, name, owner)) return done(std::move(*bad));
  const auto kind = shared ? lock::HoldKind::read : lock::HoldKind::write;
  start_owned<void>(core, std::move(cancel), std::move(done),
                    [name = std::move(name), owner = std::move(owner), kind](auto c) mutable {
                      return unlock_owned_task(std::move(c), std::move(name), std::move(owner),
                                               kind);
                    });
}

void start_extend_owned(const Client& client, std::string name, OwnerToken owner,
                        std::chrono::milliseconds ttl, bool shared,
                        std::shared_ptr<AsyncCancel> cancel, Done<Millis> done) {
  const auto& core = Access::core(client);
  if (auto bad = check_owned(*core, name, owner, ttl)) return done(std::move(*bad));
  const auto kind = shared ? lock::HoldKind::read : lock::HoldKind::write;
  start_owned<Millis>(
      core, std::move(cancel), std::move(done),
      [name = std::move(name), owner = std::move(owner), ttl, kind](auto c) mutable {
        return extend_owned_task(std::move(c), std::move(name), std::move(owner), ttl, kind);
      });
}

void start_status(const Client& client, std::string name, std::shared_ptr<AsyncCancel> cancel,
                  Done<LockStatus> done) {
  const auto& core = Access::core(client);
  if (name.empty()) return done(Error(errc::invalid_argument, "lock name must not be empty"));
  start_owned<LockStatus>(core, std::move(cancel), std::move(done),
                          [name = std::move(name)](auto c) mutable {
                            return status_task(std::move(c), std::move(name));
                          });
}

void start_detach(Lease& lease, Done<OwnerToken> done) {
  const auto core = Access::core(lease);
  const auto state = Access::state(lease);
  if (!state) return done(Error(errc::invalid_argument, "lease is empty (moved from)"));
  if (auto bad = begin_detach(*state)) return done(std::move(*bad));
  Access::empty(lease);  // the caller's Lease is empty from here on: the hold is handed over
  // Not cancellable: the owner is all that is left of the hold, and dropping it would leave the
  // lock on the nodes for its ttl with nobody able to release it.
  core->nodes().post_handler([core = core, state, owner = state->owner(), done = std::move(done),
                              token = core->started()]() mutable {
    engine::start(detach_task(std::move(core), std::move(state)),
                  engine::counted(token, [owner, done = std::move(done)](bool) mutable {
                    done(std::move(owner));
                  }));
  });
}

namespace {

using HandBacks = std::vector<std::unique_ptr<HandBack>>;

constexpr std::size_t kMaxBatch = 16;

// Runs a batch of completions on their executor, in the order the io thread made them (a later
// batch is queued behind this one). Should one throw (asio lets a handler's exception out of
// run()), those after it go on in a batch of their own, posted before the exception leaves.
void run_batch(const asio::any_io_executor& executor, HandBacks batch) {
  std::size_t next = 0;
  struct RestOnThrow {
    const asio::any_io_executor& executor;
    HandBacks& batch;
    std::size_t& next;
    ~RestOnThrow() {
      if (next >= batch.size()) return;
      HandBacks rest(std::make_move_iterator(batch.begin() + static_cast<std::ptrdiff_t>(next)),
                     std::make_move_iterator(batch.end()));
      asio::post(executor, [executor = executor, rest = std::move(rest)]() mutable {
        run_batch(executor, std::move(rest));
      });
    }
  } rest_on_throw{executor, batch, next};
  while (next < batch.size()) {
    auto completion = std::move(batch[next++]);
    completion->run();
  }
}

// The io thread's completions not yet handed back: posted once the handler that completed
// them returns (by a handler posted behind it), or as the thread ends.
class Pending {
 public:
  ~Pending() { flush(); }  // the io thread ends (io_context::stop may drop the posted flush)

  void add(asio::io_context& io, asio::any_io_executor executor,
           std::unique_ptr<HandBack> completion, asio::any_io_executor work) {
    // Consecutive completions for one executor share one post. The executor is kept by its
    // batch, or let go here, before the flush below can end the works: a strand's last copy
    // must not outlive its caller's work (see flush).
    if (batches_.empty() || batches_.back().executor != executor) {
      batches_.push_back(Batch{std::move(executor), {}});
      // Its full size at once: one allocation, not one per doubling (the posted batch takes it).
      batches_.back().completions.reserve(kMaxBatch);
    } else {
      executor = asio::any_io_executor();
    }
    batches_.back().completions.push_back(std::move(completion));
    works_.push_back(std::move(work));
    // Not more than this many at a time: the caller starts nothing of a batch before it gets
    // it, and a batch of the whole read (up to every operation in flight) leaves Redis and the
    // caller taking turns. At 64 in flight with both threads on one CPU: 29k cycles/s without a
    // cap, 35k with 8, 40k with 16, 39k with 32 (28k to 32k before batching).
    if (works_.size() >= kMaxBatch) return flush();
    if (!flush_posted_) {
      flush_posted_ = true;
      // Deferred, not posted: on the io thread itself it joins the thread's own queue, which
      // asio moves behind the other handlers as this one returns, without the context's lock.
      asio::defer(io, [this] { flush(); });
    }
  }

  // batches_ and works_ are emptied in place, not moved from: the next batch reuses their
  // capacity instead of allocating them again (several allocations per flush).
  void flush() {
    flush_posted_ = false;
    for (auto& batch : batches_) {
      asio::post(batch.executor,
                 [executor = batch.executor, completions = std::move(batch.completions)]() mutable {
                   run_batch(executor, std::move(completions));
                 });
    }
    // The batches' copies of the executors before the works: once its work ends, a caller's
    // context may run out of work and be destroyed, with the strand an executor copy refers
    // to (ThreadSanitizer: AsyncTest.BoundExecutorRunsTheCompletion, a strand's destructor
    // locking its destroyed service's mutex on the io thread, about 1 run in 5 under load).
    batches_.clear();
    // Only after every post() returned: see initiate (dlock/async.h).
    works_.clear();
  }

 private:
  struct Batch {
    asio::any_io_executor executor;
    HandBacks completions;
  };
  std::vector<Batch> batches_;
  std::vector<asio::any_io_executor> works_;  // tracked: each keeps its caller's context running
  bool flush_posted_ = false;
};

}  // namespace

void hand_back(asio::any_io_executor executor, std::unique_ptr<HandBack> completion,
               asio::any_io_executor work) {
  if (auto* io = engine::io_thread_context()) {
    thread_local Pending pending;
    return pending.add(*io, std::move(executor), std::move(completion), std::move(work));
  }
  // Elsewhere (a cancellation, on the thread that asked for it): at once.
  asio::post(executor, [completion = std::move(completion)] { completion->run(); });
  executor = asio::any_io_executor();  // before the work: see Pending::flush
  work = asio::any_io_executor();      // only after post() returned: see initiate (dlock/async.h)
}

void cancel_pending_waits(ClientCore& core) {
  for (const auto& cancel : core.pending_waits()) cancel->request();
}

std::chrono::milliseconds lease_ttl(const Lease& lease) {
  return lease.ttl();
}

}  // namespace dlock::detail

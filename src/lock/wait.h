// SPDX-License-Identifier: MIT
// The wait: how Client::lock, async_lock and Semaphore wait for what another owner holds,
// written once. One wait is:
//   1. after this client's own release of the name, a short grace first (lock/hand_off.h);
//   2. an attempt; uncontended, that is all: no subscription;
//   3. a refusal ends the wait when it is final (next_step: not retryable, cancelled, out of
//      time); else
//   4. the first time, listen on the release channel and try again at once (listening before
//      the next attempt, so a release in between is not missed); after that, nap until a
//      release message, the holder's ttl or the deadline (next_nap), then try again;
//   5. giving up leaves the fair queue or the waiting writers, and the channel.
//
// An attempt is the caller's (Attempts): one lock's acquisition, or a semaphore's pass over
// its slots. The wait runs on the caller's thread, blocking (Client::lock, Semaphore), or as a
// Task on the io thread (async_lock). On the caller's thread every step blocks and the Task
// never suspends but at its very end (end_wait_task may wait for the membership's mutex and
// resume on the io thread), so wait_sync finishes it there: attempts keep the caller-driven
// fast path (node/borrowed_run.h) and a thread-bound owner stays the caller's thread's.
//
// next_step and next_nap are pure, for unit tests (tests/unit/wait_test.cc).
#pragma once

#include <dlock/result.h>
#include <dlock/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/task.h"
#include "lock/quorum_lock.h"
#include "lock/waiters.h"

namespace dlock::lock {

using WaitClock = std::chrono::steady_clock;

// Refusals worth another attempt: the lock is held, or too few nodes answered in time (they
// may answer the next one). Anything else (a bad argument, a script error) is final.
bool retryable(const Error& e);

// A refused attempt, as the wait sees it.
struct Refusal {
  Error error;
  // Another owner holds what was asked for (on a quorum, or for a semaphore some of its
  // slots): its release will send a message.
  bool contended = false;
  // How long the soonest holder's key still lives, when a node said.
  std::optional<std::chrono::milliseconds> holder_ttl;
  // A waiting writer was registered on some node (readers held it there).
  bool writer_registered = false;
};

// A lock's refusal: contended when the lock is held.
Refusal refusal_of(Refused refused);

// What ends the wait after a refusal: nullopt to wait and try again, else the error to give up
// with. `waits`: the call may wait at all (a wait of 0 is one attempt). A lock still held when
// the time is out gives errc::wait_timeout with `timeout_message`.
std::optional<Error> next_step(const Error& refused, bool cancelled, bool waits, bool out_of_time,
                               const std::string& timeout_message);

struct NapPolicy {
  std::chrono::milliseconds retry_delay{50};
  // Fair mode: the queue's waiter timeout. A queued waiter checks in within a third of it, so
  // the queue never takes it for dead.
  std::optional<std::chrono::milliseconds> queue_timeout;
  // Jitter after every nap, not only after a lost race (a semaphore's waiters: many wait for
  // the same slots and none can tell that it lost a race).
  bool jitter_every_nap = false;
};

// How long to sleep after `last` before trying again (a release message may end it sooner).
// The holder's ttl and 1 ms when it is known to be held (its key is gone by then, even if its
// release message was lost), else retry_delay; `jitter` is added after a lost race (woken by
// a release, yet refused: others were woken too) or when the holder's ttl is unknown, so
// competing waiters spread out. A registered writer comes back within a third of its
// registration, whatever another node said of the holder (a longer nap would let readers in
// once the registration ran out).
std::chrono::milliseconds next_nap(const Refusal& last, bool lost_race, const WriterWait& writer,
                                   const NapPolicy& policy, std::chrono::milliseconds jitter);

// A random delay in [0, base] (at least [0, 1 ms]).
std::chrono::milliseconds jitter(std::chrono::milliseconds base);

// Cancels a wait from any thread (a stop token's callback, an asio cancellation slot): wakes
// the waiter it sleeps on now, or the one it sets next.
class WaitCancel {
 public:
  void set(std::shared_ptr<Waiter> waiter);
  void cancel();
  bool cancelled();

 private:
  std::mutex mu_;
  std::shared_ptr<Waiter> waiter_;  // guarded by mu_
  bool cancelled_ = false;          // guarded by mu_
};

// The attempts a wait makes.
class Attempts {
 public:
  virtual ~Attempts() = default;
  // One attempt. nullopt: acquired (the implementation keeps what it got); else why not.
  // `writer`: the waiting writer's registration so far.
  virtual engine::Task<std::optional<Refusal>> attempt(WriterWait writer) = 0;
  // After the wait ended acquired: if what was acquired can no longer be handed over (its
  // validity ran out while the wait settled: end_wait_task may queue behind a greeting to a
  // slow node), drops it (released) and returns true, and the wait tries again while it has
  // time. False: keep it.
  virtual bool drop_lapsed() { return false; }
};

enum class WaitOn { caller_thread, io_thread };

// What a wait needs of the client; all outlive the wait.
struct WaitContext {
  WaitOn on = WaitOn::caller_thread;
  Waiters& waiters;
  QuorumLock& lock;
  asio::io_context& io;  // the io thread's, for naps there
};

// errc::wait_timeout's text: before + subject + after + the wait in ms. Made only when a wait
// runs out (the uncontended path builds no strings it does not use).
struct TimeoutText {
  const char* before = "";
  std::string subject;
  const char* after = "";
  std::chrono::milliseconds wait{0};
  std::string str() const;
};

struct WaitPlan {
  WaitClock::time_point deadline;
  bool waits = false;  // false: one attempt, no subscription
  // Let others go first until then (lock/hand_off.h).
  std::optional<WaitClock::time_point> hold_back_until;
  // The lock name whose release channel the wait listens on, and whose fair queue and waiting
  // writers it leaves when it gives up (a semaphore's: its slot 0's, lock/keys.h).
  std::string name;
  // Listening: a fair waiter wakes only for its own owner (Waiter).
  std::string wake_for;
  bool wakes_on_every = false;
  // Giving up leaves the queue as queue_owner when `queued` or once the writer is registered.
  OwnerToken queue_owner;
  bool queued = false;
  WriterWait writer;
  NapPolicy nap;
  TimeoutText timeout;
};

// Waits as above. An empty Result: an attempt acquired. Errors: the last refusal's (not
// retryable, or a wait of 0), wait_timeout, cancelled. A grant that lapsed before the wait
// ended (Attempts::drop_lapsed) is dropped, and the wait starts again while it has time.
// wait_task is the io thread's (WaitOn::io_thread); a wait on the caller's thread is wait_sync,
// which runs each wait to its end there.
engine::Task<Result<void>> wait_task(WaitPlan plan, WaitContext context, Attempts& attempts,
                                     WaitCancel& cancel);
Result<void> wait_sync(const WaitPlan& plan, WaitContext context, Attempts& attempts,
                       WaitCancel& cancel);

}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
// QuorumLock: the lock algorithm over N nodes (a Fanout), the same code for 1 node and for N
// (Redlock). It knows holds, not leases: a hold is one owner's possession of one name under a
// hold id unique to the acquisition. Reentrant leases share one hold; counting them is the
// client's business (lock/holds.h), so a node never decides whether an acquisition is
// reentrant.
//
// acquire: run the acquire script on all nodes at once; success needs a quorum of voting nodes
//          (see Membership) and validity = ttl - elapsed - drift > 0. The fencing token is then
//          made to hold on a majority (two phases, below). On failure, release the new hold id
//          on *all* nodes, also the ones that seemed to fail (their reply may have been lost):
//          it matches only what this attempt created, so nothing else is undone.
// release: run the release script for the hold on all nodes.
// extend / renew: re-arm the ttl on all nodes, never shortening it (renew.lua); success needs
//          a quorum before validity ends.
//
// Fencing on N nodes: each granting node increments its counter; the token is the largest
// counter seen on any node that answered (plus one for nodes that refused). Taking that
// maximum is not enough: the next quorum may miss the node it came from. So unless a quorum of
// nodes already holds the token, it is written to all nodes (fence_raise) and handed out only
// once a quorum of the voting nodes that granted the hold confirmed it, each with the hold still
// there. Any later quorum then meets a node that held it before the next grant there.
#pragma once

#include <dlock/result.h>
#include <dlock/status.h>
#include <dlock/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <variant>

#include "engine/task.h"
#include "lock/calls.h"
#include "lock/hold.h"
#include "lock/membership.h"
#include "lock/tally.h"
#include "node/fanout.h"

namespace dlock::lock {

using Clock = std::chrono::steady_clock;

struct Acquired {
  FencingToken fence;
  Clock::time_point valid_until;
};

// A failed attempt: the error, and when contended, how long the holder's key has left at most
// (a waiter need not try again before that unless told of a release).
struct Refused {
  Error error;
  std::optional<std::chrono::milliseconds> holder_ttl;
  // A waiting writer was registered on some node (readers held it there): leave when giving up.
  bool writer_registered = false;
};

// The replica guard (LockOptions::min_replicas): a node's grant counts only once WAIT confirmed
// `replicas` of its replicas within `timeout` (node::Call). Zero replicas: off.
struct ReplicaGuard {
  std::size_t replicas = 0;
  std::chrono::milliseconds timeout{0};
};

class QuorumLock {
 public:
  // `observer` (may be null) hears of quarantines.
  QuorumLock(node::Fanout& nodes, double drift_factor, Observer* observer = nullptr,
             MembershipOptions membership = {})
      : nodes_(nodes),
        drift_factor_(drift_factor),
        record_window_(!membership.allow_eviction),
        membership_(nodes, drift_factor, observer, membership) {}

  // One attempt at a new hold. Errors: lock_held, quorum_not_reached, timeout (quorum came
  // after the ttl). With `fair`, in arrival order through the name's queue. `permits`: for a
  // slot of a semaphore, the permit count this client uses; a node that recorded another one
  // refuses, and the attempt fails with invalid_argument (whatever the other nodes said).
  std::variant<Acquired, Refused> acquire(const HoldId& hold, std::chrono::milliseconds ttl,
                                          const std::optional<FairTicket>& fair = std::nullopt,
                                          WriterWait writer = {}, ReplicaGuard guard = {},
                                          std::size_t permits = 0);

  // Takes a waiter out of the fair queue and the waiting writers on all nodes (it gave up, or
  // got the lock).
  void leave_queue(const std::string& name, const OwnerToken& owner);

  // Releases the hold on all nodes; returns once a quorum confirmed. `listeners`, if given,
  // gets the largest number of connections subscribed to the release channel on a node that
  // freed the lock. Errors: not_owner (no quorum knew the hold), quorum_not_reached (too few
  // nodes answered to tell).
  Result<void> release(const HoldId& hold, std::size_t* listeners = nullptr);

  // Returns the new end of validity. Errors: lock_lost (a quorum no longer knows the hold),
  // timeout (valid_until passed before a quorum confirmed: the lease it was judged for is over,
  // the hold may not be), quorum_not_reached (too few answers; valid_until still stands).
  Result<Clock::time_point> extend(const HoldId& hold, std::chrono::milliseconds ttl,
                                   Clock::time_point valid_until);

  // extend() for many holds in one pipelined round per node. One result per renewal, in order.
  std::vector<Result<Clock::time_point>> renew(const std::vector<Renewal>& renewals);

  // The same operations as Tasks (engine/task.h): the blocking ones above run these and wait.
  // `hold` is read by reference (no copy of its strings per call): it must outlive the Task.
  engine::Task<std::variant<Acquired, Refused>> acquire_task(
      const HoldId& hold, std::chrono::milliseconds ttl, std::optional<FairTicket> fair,
      WriterWait writer = {}, ReplicaGuard guard = {}, std::size_t permits = 0);
  engine::Task<bool> leave_queue_task(std::string name, OwnerToken owner);
  // `hold` and `listeners` (if given) must outlive the Task.
  engine::Task<Result<void>> release_task(const HoldId& hold, std::size_t* listeners = nullptr);
  engine::Task<Result<Clock::time_point>> extend_task(HoldId hold, std::chrono::milliseconds ttl,
                                                      Clock::time_point valid_until);
  engine::Task<std::vector<Result<Clock::time_point>>> renew_task(std::vector<Renewal> renewals);

  // A wait (lock/wait.h) begins and ends: its refused attempts take back no announcement
  // until it ends (its next attempt would announce again), and its end sends what is due.
  void begin_wait() { membership_.begin_wait(); }
  engine::Task<bool> end_wait_task();

  node::Fanout& fanout() noexcept { return nodes_; }

  LockStatus inspect(const std::string& name);
  engine::Task<LockStatus> inspect_task(std::string name);
  // Changes the permit count recorded for the semaphore `name` (dlock::Semaphore's name) on
  // every node (semaphore_resize.lua); `max_permits` bounds the slots a shrink checks. Returns the
  // count the nodes had (0: no node had a record, no permit is held). Errors: lock_held (shrinking
  // while a permit at `permits` or above is held; the nodes that changed are set back),
  // quorum_not_reached (some node did not answer: it keeps the old count, so clients of the new one
  // are refused there; run it again).
  Result<std::size_t> resize_permits(const std::string& name, std::size_t permits,
                                     std::size_t max_permits);
  std::vector<ForcedRelease> force_release(const std::string& name, bool include_foreign);

  std::size_t quorum() const noexcept { return nodes_.quorum(); }
  std::size_t size() const noexcept { return nodes_.size(); }
  std::chrono::milliseconds drift(std::chrono::milliseconds ttl) const;

 private:
  NodeError node_error(std::size_t i, const Error& e) const;
  NodeError node_error(std::size_t i, errc code, std::string reason) const;
  node::ScriptRound send_acquire(const HoldId& hold, std::chrono::milliseconds ttl,
                                 const std::optional<FairTicket>& fair, WriterWait writer,
                                 ReplicaGuard guard, std::size_t permits,
                                 node::SharedText announcement);
  // One renewal's outcome from every node's reply to its batch (`slot`: its place there).
  Result<Clock::time_point> judge_renewal(const Renewal& renewal, const node::Outcomes& per_node,
                                          std::size_t slot, const Membership::View& view,
                                          Clock::time_point start, Clock::time_point now) const;
  // Every node's reply to an acquire, whether it votes, and why each one that did not grant
  // (or does not vote) did not.
  struct AcquireAnswers {
    std::vector<AcquireReply> replies;
    std::vector<bool> votes;
    std::vector<NodeError> failures;
  };
  AcquireAnswers read_acquire(const node::Outcomes& outcomes, const Membership::View& view,
                              std::size_t permits) const;
  // A granted attempt's last steps (leaving the fair queues where `leave_queues`, settling):
  // the lease, or nullopt when its validity ran out meanwhile (then released; settled as
  // granted, a longer announcement at most).
  engine::Task<std::optional<Acquired>> hand_over(HoldId hold, std::chrono::milliseconds ttl,
                                                  Clock::time_point start, AcquireTally tally,
                                                  bool leave_queues);
  // The error for a failed attempt, once its clean-up was sent.
  // `permits`: the count this client named (a semaphore slot whose record says another).
  Refused refusal(const std::string& name, const AcquireTally& tally, Clock::duration elapsed,
                  std::chrono::milliseconds ttl, std::vector<NodeError> failures, bool fence_failed,
                  std::size_t permits) const;
  // A round begun with Membership::refreshing(ttl, true) is decided (`refused`: it granted
  // nothing; `granted`: the ttl of a lease it granted or renewed, or zero); sends the
  // retraction Membership asks for, if any (true: one was sent). co_await settle(...): without
  // a Task when Membership's state is free and nothing is to be taken back (nearly always).
  struct SettleLater {
    QuorumLock* lock;
    bool refused;
    std::chrono::milliseconds granted;
    std::optional<std::vector<std::string>> taken;  // settled already: this to retract
    engine::Task<bool> operator()() {
      return lock->settle_task(refused, granted, std::move(taken));
    }
  };
  engine::Quick<bool, SettleLater> settle(bool refused, std::chrono::milliseconds granted);
  engine::Task<bool> settle_task(bool refused, std::chrono::milliseconds granted,
                                 std::optional<std::vector<std::string>> taken);
  // Sends max_ttl_retract.lua for `retracted` (this client's announcements), if any.
  engine::Task<bool> retract(std::vector<std::string> retracted);
  // Second phase of the fencing token; false if a quorum did not confirm it.
  // The token is on a quorum, but some granting node's counter is below it (it missed grants,
  // or came back from an old snapshot): fence_raise on every node, in the background, so that
  // no node stays behind for as long as the name is in use (issue 28).
  void raise_behind(const HoldId& hold, std::uint64_t token, std::chrono::milliseconds ttl);
  // The second phase of a token not yet on a quorum: true once a quorum of the nodes in
  // `granted` (granted this hold and vote) answered with a counter of at least `token` and
  // with `hold` still there, each on the connection epoch it voted on (`epochs`).
  engine::Task<bool> raise_fence(HoldId hold, std::uint64_t token, std::chrono::milliseconds ttl,
                                 std::vector<bool> granted, std::vector<std::uint64_t> epochs,
                                 std::vector<NodeError>& failures);

  node::Fanout& nodes_;
  const double drift_factor_;
  // Acquisitions may skip the max-ttl record's check (node/record_window.h): not where keys may
  // be evicted, since skipped checks leave the record the coldest key.
  const bool record_window_;
  Membership membership_;
};

}  // namespace dlock::lock

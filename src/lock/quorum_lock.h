// SPDX-License-Identifier: MIT
// QuorumLock: the lock algorithm over a NodeSet, the same code for 1 node and for N (Redlock).
//
// acquire: run the acquire script on all nodes at once; success needs a quorum of voting nodes
//          (see Membership) and validity = ttl - elapsed - drift > 0. The fencing token is then
//          made to hold on a majority (two phases, below). On failure, release on *all* nodes,
//          also the ones that seemed to fail (their reply may have been lost).
// release: run the release script on all nodes.
// extend / renew: re-arm the ttl on all nodes (renew.lua; extend is a batch of one); success
//          needs a quorum before validity ends.
//
// Fencing on N nodes: each granting node increments its counter; the token is the largest
// counter seen on any node that answered (plus one for nodes that did not grant). Taking that
// maximum is not enough: the next quorum may miss the node it came from. So unless a quorum of
// nodes already holds the token, it is written to all nodes (fence_raise) and handed out only
// once a quorum confirmed. Any later quorum then meets a node that holds it.
#pragma once

#include <dlock/result.h>
#include <dlock/status.h>
#include <dlock/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <variant>

#include "lock/membership.h"
#include "node/node_set.h"

namespace dlock::lock {

using Clock = std::chrono::steady_clock;

struct Acquired {
  FencingToken fence;
  Clock::time_point valid_until;
  bool reentered = false;  // the owner held it already: one more hold was counted
};

// A failed attempt: the error, and when contended, how long the holder's key has left at most
// (a waiter need not try again before that unless told of a release).
struct Refused {
  Error error;
  std::optional<std::chrono::milliseconds> holder_ttl;
};

// Fair mode: the waiter's place in line (see fair_acquire.lua).
struct FairTicket {
  std::int64_t arrival_ms = 0;  // wall-clock ms when the waiter first asked; same on all nodes
  std::chrono::milliseconds waiter_timeout{0};
  bool enqueue = false;  // join the queue if the lock cannot be had now
};

// One lock for the watchdog's batched renewal.
struct Renewal {
  std::string name;
  OwnerToken owner;
  std::chrono::milliseconds ttl{0};
  Clock::time_point valid_until;
};

class QuorumLock {
 public:
  QuorumLock(node::NodeSet& nodes, double drift_factor)
      : nodes_(nodes), drift_factor_(drift_factor), membership_(nodes, drift_factor) {}

  // One attempt. Errors: lock_held, quorum_not_reached, timeout (quorum came after the ttl).
  // With `fair`, in arrival order through the name's queue.
  std::variant<Acquired, Refused> acquire(const std::string& name, const OwnerToken& owner,
                                          std::chrono::milliseconds ttl,
                                          const std::optional<FairTicket>& fair = std::nullopt);

  // Takes a waiter out of the fair queue on all nodes (it gave up).
  void leave_queue(const std::string& name, const OwnerToken& owner);

  // Gives back one hold on all nodes; returns once a quorum confirmed. `listeners`, if given,
  // gets the largest number of connections subscribed to the release channel on a node that
  // freed the lock. Errors: not_owner (no quorum knew the owner), quorum_not_reached (too few
  // nodes answered to tell).
  Result<void> release(const std::string& name, const OwnerToken& owner,
                       std::size_t* listeners = nullptr);

  // Returns the new end of validity. Errors: lock_lost (a quorum no longer knows the owner, or
  // valid_until passed first), quorum_not_reached (too few answers; valid_until still stands).
  Result<Clock::time_point> extend(const std::string& name, const OwnerToken& owner,
                                   std::chrono::milliseconds ttl, Clock::time_point valid_until);

  // extend() for many locks in one pipelined round per node. One result per renewal, in order.
  std::vector<Result<Clock::time_point>> renew(const std::vector<Renewal>& renewals);

  LockStatus inspect(const std::string& name);
  std::vector<ForcedRelease> force_release(const std::string& name, bool include_foreign);

  std::size_t quorum() const noexcept { return nodes_.quorum(); }
  std::size_t size() const noexcept { return nodes_.size(); }
  std::chrono::milliseconds drift(std::chrono::milliseconds ttl) const;

 private:
  NodeError node_error(std::size_t i, const Error& e) const;
  NodeError node_error(std::size_t i, errc code, std::string reason) const;
  // Outcome of an extend-like step for one lock: `extended` nodes said 1, `errors` failed.
  Result<Clock::time_point> judge_extension(const std::string& name, std::size_t extended,
                                            std::size_t errors, std::vector<NodeError> failures,
                                            std::chrono::milliseconds ttl, Clock::time_point start,
                                            Clock::time_point valid_until) const;
  // Second phase of the fencing token; false if a quorum did not confirm it.
  bool raise_fence(const std::string& name, std::uint64_t token, std::vector<NodeError>& failures);

  node::NodeSet& nodes_;
  const double drift_factor_;
  Membership membership_;
};

}  // namespace dlock::lock

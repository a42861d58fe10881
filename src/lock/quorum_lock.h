// SPDX-License-Identifier: MIT
// QuorumLock: the lock algorithm over a NodeSet, the same code for 1 node and for N (Redlock).
//
// acquire: run the acquire script on all nodes at once; success needs a quorum of acquisitions
//          and validity = ttl - elapsed - drift > 0. Otherwise release on *all* nodes, also the
//          ones that seemed to fail (their reply may have been lost) before reporting.
// release: run the release script on all nodes.
// extend:  re-arm the ttl on all nodes; success needs a quorum before the old validity ends.
#pragma once

#include <dlock/result.h>
#include <dlock/status.h>
#include <dlock/types.h>

#include <chrono>
#include <string>

#include "node/node_set.h"

namespace dlock::lock {

using Clock = std::chrono::steady_clock;

struct Acquired {
  FencingToken fence;
  Clock::time_point valid_until;
  bool reentered = false;  // the owner held it already: one more hold was counted
};

class QuorumLock {
 public:
  QuorumLock(node::NodeSet& nodes, double drift_factor)
      : nodes_(nodes), drift_factor_(drift_factor) {}

  // One attempt. Errors: lock_held, quorum_not_reached, timeout (quorum came after the ttl).
  Result<Acquired> acquire(const std::string& name, const OwnerToken& owner,
                           std::chrono::milliseconds ttl);

  // Gives back one hold on all nodes. Errors: not_owner (no quorum knew the owner),
  // quorum_not_reached (too few nodes answered to tell).
  Result<void> release(const std::string& name, const OwnerToken& owner);

  // Returns the new end of validity. Errors: lock_lost (a quorum no longer knows the owner, or
  // valid_until passed first), quorum_not_reached (too few answers; valid_until still stands).
  Result<Clock::time_point> extend(const std::string& name, const OwnerToken& owner,
                                   std::chrono::milliseconds ttl, Clock::time_point valid_until);

  LockStatus inspect(const std::string& name);

  std::size_t quorum() const noexcept { return nodes_.quorum(); }
  std::chrono::milliseconds drift(std::chrono::milliseconds ttl) const;

 private:
  NodeError node_error(std::size_t i, const Error& e) const;
  NodeError node_error(std::size_t i, errc code, std::string reason) const;

  node::NodeSet& nodes_;
  const double drift_factor_;
};

}  // namespace dlock::lock

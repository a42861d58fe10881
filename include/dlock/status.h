// SPDX-License-Identifier: MIT
// dlock/status.h: what each node knows about one lock name (for `dlock status` and operators).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock {

// One owner's hold of a lock on one node.
struct NodeHolder {
  std::string owner;
  // Unique per acquisition: reentrant leases of one owner in one client share it, and a
  // release or renewal acts only on the hold it names.
  std::string hold;
};

struct NodeLockState {
  std::string node;                  // the node's address (password elided)
  std::optional<std::string> error;  // set when the node could not be asked; the rest is empty
  // "free", "dlock" (held by a dlock owner) or "foreign" (a key of another kind, e.g. a plain
  // SET NX lock of another library, which dlock treats as held and never touches).
  std::string kind = "free";
  std::vector<NodeHolder> owners;  // for "dlock" keys: who holds it (one owner)
  std::int64_t ttl_ms = -1;        // remaining ttl, -1 when free
  // The node's fencing counter this name draws from (shared by the names of one hash slot;
  // 0: never taken).
  std::int64_t fence = 0;
  std::int64_t queued = 0;  // waiters in the name's fair queue on this node
  // > 0: the node restarted recently and stays out of quorums for this many ms (it may have
  // lost the keys of live locks). See docs/features.md, restarted-node protection.
  std::int64_t quarantined_ms = 0;
};

struct LockStatus {
  std::string name;
  bool held = false;  // the key is present on a quorum of nodes
  std::size_t quorum = 0;
  std::vector<NodeLockState> nodes;
};

// What Client::force_release did on one node.
struct ForcedRelease {
  std::string node;
  // "deleted", "deleted-foreign", "kept-foreign" (not a dlock lock; see include_foreign),
  // "free" (nothing there), or empty when `error` is set.
  std::string outcome;
  std::optional<std::string> error;
};

}  // namespace dlock

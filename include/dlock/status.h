// SPDX-License-Identifier: MIT
// dlock/status.h: what each node knows about one lock name (for `dlock status` and operators).
//
//   auto s = client.status("inventory");
//   if (s) {
//     for (const dlock::NodeLockState& n : s->nodes) {
//       if (n.error) std::cout << n.node << ": " << n.error->reason << "\n";
//       else std::cout << n.node << ": " << dlock::to_string(n.kind)
//                      << (n.ttl ? " for " + std::to_string(n.ttl->count()) + " ms" : "") << "\n";
//     }
//   }
//
// Plain values: copy them, keep them, read them from any thread.
#pragma once

#include <dlock/result.h>
#include <dlock/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock {

// What a node holds under a lock's name.
enum class KeyKind {
  free,     // nothing
  dlock,    // a dlock lock held for writing (exclusively): `owners` says whose
  shared,   // held by readers only (dlock::SharedMutex): `readers` says whose
  foreign,  // a key of another kind (another library's SET NX lock, say): treated as held and
            // never touched by dlock, except force_release with include_foreign
};

constexpr std::string_view to_string(KeyKind k) noexcept {
  switch (k) {
    case KeyKind::free:
      return "free";
    case KeyKind::dlock:
      return "dlock";
    case KeyKind::shared:
      return "shared";
    case KeyKind::foreign:
      return "foreign";
  }
  return "?";
}

// One owner's hold of a lock on one node.
struct NodeHolder {
  OwnerToken owner;
  // Unique per acquisition: reentrant leases of one owner in one client share it, and a
  // release or renewal acts only on the hold it names.
  std::string hold;
};

// One reader's hold of a lock on one node (dlock::SharedMutex).
struct NodeReader {
  OwnerToken owner;
  std::string hold;
  std::chrono::milliseconds ttl{0};  // until it expires on this node
};

struct NodeLockState {
  std::string node;  // the node's address (password elided)
  // Set when the node could not be asked (no answer: the connection's error; an error reply:
  // errc::server_error; an answer that makes no sense: errc::protocol_error); the rest is empty.
  std::optional<NodeError> error;
  KeyKind kind = KeyKind::free;
  std::vector<NodeHolder> owners;  // for KeyKind::dlock: who holds it (one owner)
  // Live read holds (dlock::SharedMutex); beside a writer only when it is the writer's own.
  std::vector<NodeReader> readers;
  // Remaining ttl (for KeyKind::shared, the last reader's). Empty when free, or for a foreign
  // key that never expires.
  std::optional<std::chrono::milliseconds> ttl;
  // The node's fencing counter this name draws from (shared by the names of one hash slot;
  // zero: never taken). The next holder's token is larger.
  FencingToken fence;
  std::size_t queued = 0;  // waiters in the name's fair queue on this node
  // Writers registered as waiting for the readers to leave (new readers stay out meanwhile).
  std::size_t writers_waiting = 0;
  // Non-zero: the node restarted recently and stays out of quorums for this long (it may have
  // lost the keys of live locks). See docs/features.md, restarted-node protection.
  std::chrono::milliseconds quarantine{0};
  // The server's evicted_keys (INFO; a cluster's: the sum over its masters), if it answered: a
  // count that grows means the server drops keys under memory pressure.
  std::optional<std::uint64_t> evicted_keys;
  // Why this node never votes (a replica; a maxmemory-policy that may evict lock keys), or
  // empty.
  std::string never_votes;
};

struct LockStatus {
  std::string name;
  bool held = false;  // the key is present on a quorum of nodes
  std::size_t quorum = 0;
  std::vector<NodeLockState> nodes;
};

// What Client::force_release did on one node.
enum class ForceOutcome {
  deleted,          // a dlock lock (writer or readers) was deleted, its waiters woken
  deleted_foreign,  // another library's key was deleted (include_foreign)
  kept_foreign,     // another library's key was kept (include_foreign was false)
  free,             // nothing was there
};

constexpr std::string_view to_string(ForceOutcome o) noexcept {
  switch (o) {
    case ForceOutcome::deleted:
      return "deleted";
    case ForceOutcome::deleted_foreign:
      return "deleted-foreign";
    case ForceOutcome::kept_foreign:
      return "kept-foreign";
    case ForceOutcome::free:
      return "free";
  }
  return "?";
}

struct ForcedRelease {
  std::string node;
  std::optional<ForceOutcome> outcome;  // empty exactly when `error` is set
  std::optional<NodeError> error;       // as NodeLockState::error
};

}  // namespace dlock

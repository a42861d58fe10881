// SPDX-License-Identifier: MIT
// dlock/status.h: what each node knows about one lock name (for `dlock status` and operators).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock {

struct NodeLockState {
  std::string node;                  // the node's address (password elided)
  std::optional<std::string> error;  // set when the node could not be asked; the rest is empty
  // "free", "dlock" (held by a dlock owner) or "foreign" (a key of another kind, e.g. a plain
  // SET NX lock of another library, which dlock treats as held and never touches).
  std::string kind = "free";
  std::vector<std::pair<std::string, std::int64_t>> owners;  // owner -> reentrancy count
  std::int64_t ttl_ms = -1;                                  // remaining ttl, -1 when free
  std::int64_t fence = 0;   // the node's fencing counter for this name (0: never taken)
  std::int64_t queued = 0;  // waiters in the name's fair queue on this node
};

struct LockStatus {
  std::string name;
  bool held = false;  // the key is present on a quorum of nodes
  std::size_t quorum = 0;
  std::vector<NodeLockState> nodes;
};

}  // namespace dlock

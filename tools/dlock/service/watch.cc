// SPDX-License-Identifier: MIT
#include "service/watch.h"

#include <algorithm>
#include <map>
#include <set>

namespace dlock::service {

namespace {

// The key a quorum of the answering nodes agrees on, if one does.
template <typename Key>
std::optional<Key> quorum_of(const std::map<Key, std::size_t>& votes, std::size_t quorum) {
  for (const auto& [key, count] : votes) {
    if (count >= quorum) return key;
  }
  return std::nullopt;
}

}  // namespace

std::optional<WatchState> watch_state(const LockStatus& status) {
  std::size_t answered = 0;
  WatchState state;
  std::map<std::pair<std::string, std::string>, std::size_t> holders;  // (owner, hold) -> nodes
  std::map<std::string, std::size_t> readers;                          // owner -> nodes
  for (const NodeLockState& n : status.nodes) {
    if (n.error) continue;
    ++answered;
    state.fence = std::max(state.fence, n.fence.value());
    for (const NodeHolder& h : n.owners) ++holders[{h.owner.str(), h.hold}];
    std::set<std::string> seen;  // a reader's reentrant holds count once per node
    for (const NodeReader& r : n.readers) {
      if (seen.insert(r.owner.str()).second) ++readers[r.owner.str()];
    }
  }
  if (answered < status.quorum || status.quorum == 0) return std::nullopt;
  state.held = status.held;
  if (!state.held) return state;
  if (auto holder = quorum_of(holders, status.quorum)) {
    state.owner = holder->first;
    state.holds = {holder->second};
    return state;
  }
  for (const auto& [owner, count] : readers) {
    if (count >= status.quorum) state.holds.push_back("reader " + owner);
  }
  return state;
}

}  // namespace dlock::service

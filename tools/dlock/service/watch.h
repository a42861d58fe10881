// SPDX-License-Identifier: MIT
// Watch: who holds a name, as one value that changes exactly when the holder changes. The gRPC
// Watch stream (grpc_watch.h) reads the name's status every kWatchPeriod, as `dlock watch`
// does, and sends a WatchEvent each time this value changes.
#pragma once

#include <dlock/status.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlock::service {

// How often a Watch reads the name's status (one round trip to the nodes each time).
inline constexpr std::chrono::milliseconds kWatchPeriod{100};

struct WatchState {
  bool held = false;        // present on a quorum of nodes
  std::string owner;        // the exclusive holder a quorum agrees on; empty: free, or readers
  std::uint64_t fence = 0;  // the largest fencing counter the answering nodes report
  // What tells one holding from the next: the quorum's hold id for an exclusive holder (a new
  // acquisition by the same owner is a new hold), the readers' owners for a read lock.
  std::vector<std::string> holds;

  // A change of holder; the fence alone (another name's grant in the same hash slot) is not.
  bool same_holder(const WatchState& other) const {
    return held == other.held && owner == other.owner && holds == other.holds;
  }
};

// The state `status` shows, or nullopt when fewer than a quorum of nodes answered (unknown: a
// watch then sends nothing and reads again). Pure.
std::optional<WatchState> watch_state(const LockStatus& status);

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
// The arithmetic of Redlock, kept pure so unit tests can check it without a server.
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>

namespace dlock::lock {

// N/2 + 1: any two quorums of N nodes share at least one node.
constexpr std::size_t quorum(std::size_t nodes) noexcept {
  return nodes / 2 + 1;
}

// Allowance for the nodes' clocks running at different rates during one ttl:
// ttl * factor, rounded up to a whole millisecond, plus 2 ms for the expiry granularity.
inline std::chrono::milliseconds drift(std::chrono::milliseconds ttl, double factor) noexcept {
  const auto scaled = static_cast<std::chrono::milliseconds::rep>(
      std::ceil(static_cast<double>(ttl.count()) * factor));
  return std::chrono::milliseconds(scaled + 2);
}

// How long a lock acquired with `ttl` stays ours after acquisition took `elapsed` (measured on
// a monotonic clock from before the first request was sent). Not positive: not acquired.
inline std::chrono::milliseconds validity(std::chrono::milliseconds ttl,
                                          std::chrono::steady_clock::duration elapsed,
                                          double factor) noexcept {
  return ttl - std::chrono::ceil<std::chrono::milliseconds>(elapsed) - drift(ttl, factor);
}

}  // namespace dlock::lock

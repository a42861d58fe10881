// SPDX-License-Identifier: MIT
// The lock service's limits (docs/service.md, "Limits"): what one request may ask for, and how
// many waits one caller may have in flight. A request over a fixed limit (a name too long, a
// ttl or a wait over the maximum) is bad input: the same request would always be refused. Too
// many concurrent waits is overload: RESOURCE_EXHAUSTED (HTTP 429), retryable once a wait ends.
// Nothing held is ever dropped to make room.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "service/operations.h"

namespace dlock::service {

struct Limits {
  std::size_t max_name_bytes = 512;
  // A restarted Redis node is quarantined for the largest ttl in use (docs/safety.md), so a
  // bounded ttl bounds that too; a lease lives longer by being extended.
  std::chrono::milliseconds max_ttl = std::chrono::minutes(10);
  std::chrono::milliseconds max_wait = std::chrono::minutes(10);
  std::size_t max_waits = 256;  // concurrent waits per token (per client address without tokens)
};

// INVALID_ARGUMENT when the name is empty or longer than the limit. Pure.
std::optional<Failure> check_name_limit(const Limits& limits, std::string_view name);
// INVALID_ARGUMENT when the ttl that a call asks for (kDefaultTtl when it names none) or the
// wait is over its maximum. Pure.
std::optional<Failure> check_ttl_limit(const Limits& limits, std::int64_t ttl_ms);
std::optional<Failure> check_wait_limit(const Limits& limits, std::int64_t wait_ms);

// Counts the waits in flight per caller. Thread-safe.
class WaitCounter {
  struct State;

 public:
  // One place among a caller's concurrent waits, given back when the last copy goes (a slot
  // may outlive the counter: the state is shared).
  using Slot = std::shared_ptr<void>;

  explicit WaitCounter(std::size_t max);
  // A place for `caller`, or RESOURCE_EXHAUSTED when it has `max` waits already.
  Outcome<Slot> enter(const std::string& caller);
  std::size_t waiting(const std::string& caller) const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
// Names of the Redis keys and channels that belong to one lock name. The lock key is the name
// itself; auxiliary ones embed it in a hash tag so they share its Redis Cluster slot.
#pragma once

#include <string>
#include <string_view>

namespace dlock::lock {

// The fencing counter of `name`. It expires with the lock: the floor below carries its value
// into the next counter, so Redis keeps nothing for a name that is no longer locked.
inline std::string fence_key(std::string_view name) {
  return "dlock:fence:{" + std::string(name) + "}";
}

// One per node: the largest fencing token this node handed out or was raised to, for any name.
// A new counter starts from it (see acquire.lua).
inline constexpr std::string_view kFenceFloorKey = "dlock:fence-floor";

// One per node: the largest lock ttl (ms) this node knows of (hello.lua, acquire.lua).
inline const std::string kMaxTtlKey = "dlock:max-ttl";

inline std::string accepted_token_key(std::string_view key) {
  return "dlock:accepted:{" + std::string(key) + "}";
}

// The read holds of `name` (dlock::SharedMutex): a zset "HOLD_ID OWNER" -> expiry (ms, the
// node's clock). The key itself expires with its longest-lived reader.
inline std::string readers_key(std::string_view name) {
  return "dlock:readers:{" + std::string(name) + "}";
}

// Writers waiting for the readers of `name` to leave: a zset owner -> deadline (ms, the node's
// clock). New readers stay out while it has a live member (no writer starvation).
inline std::string writers_waiting_key(std::string_view name) {
  return "dlock:writers-waiting:{" + std::string(name) + "}";
}

// Slot i of the semaphore `name` (dlock::Semaphore): an ordinary lock of its own.
inline std::string semaphore_slot(std::string_view name, std::size_t i) {
  return "dlock:sem:{" + std::string(name) + "}:" + std::to_string(i);
}

// The semaphore a slot name belongs to ("dlock:sem:{NAME}" for "dlock:sem:{NAME}:<digits>"),
// or empty for any other name. NAME may itself hold '{', '}' or ':': the suffix is parsed from
// the right.
inline std::string_view semaphore_of_slot(std::string_view name) {
  constexpr std::string_view kPrefix = "dlock:sem:{";
  if (name.substr(0, kPrefix.size()) != kPrefix) return {};
  const auto close = name.rfind("}:");
  if (close == std::string_view::npos || close < kPrefix.size() || close + 2 == name.size()) {
    return {};
  }
  for (char c : name.substr(close + 2)) {
    if (c < '0' || c > '9') return {};
  }
  return name.substr(0, close + 1);
}

// What a lock's fair queue and release channel are named after: the lock, or for a slot of a
// semaphore the semaphore (one queue and one channel for all its slots).
inline std::string_view queued_as(std::string_view name) {
  const auto semaphore = semaphore_of_slot(name);
  return semaphore.empty() ? name : semaphore;
}

// The fair queue (fair_acquire.lua): a zset waiter -> arrival ticket, and its liveness, a hash
// waiter -> deadline. A fair semaphore's waiters queue once for all its slots: the first in
// line takes whichever slot is free.
inline std::string queue_key(std::string_view name) {
  return "dlock:queue:{" + std::string(queued_as(name)) + "}";
}

inline std::string queue_alive_key(std::string_view name) {
  return "dlock:queue-alive:{" + std::string(queued_as(name)) + "}";
}

// Where a lock's releases are published, and waiters listen. Every slot of a semaphore shares
// its semaphore's channel: a waiter for a permit hears the release of any slot.
inline std::string release_channel(std::string_view name) {
  return "dlock:release:{" + std::string(queued_as(name)) + "}";
}

}  // namespace dlock::lock

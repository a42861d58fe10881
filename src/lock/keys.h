// SPDX-License-Identifier: MIT
// Names of the Redis keys and channels that belong to one lock name. The lock key is the name
// itself; auxiliary ones are named so that they share its Redis Cluster slot (a script may only
// touch keys of one slot), see auxiliary_key.
#pragma once

#include <string>
#include <string_view>

#include "node/slots.h"

namespace dlock::lock {

// Whether `name` holds a '{' or a '}'. Two scans for one byte each: find_first_of("{}") calls
// memchr on the set once per byte of the name, and a lock cycle asks this for seven keys.
inline bool has_brace(std::string_view name) {
  return name.find('{') != std::string_view::npos || name.find('}') != std::string_view::npos;
}

// What an auxiliary key of `name` carries as its hash tag: `name`'s own hash tag if it has one,
// else `name` itself if that has no brace (the tag then hashes exactly as the name does), else
// the short tag of `name`'s slot (a name like "a}b" cannot be a tag: it would end at the '}').
inline std::string cluster_tag(std::string_view name) {
  if (const auto tag = node::hash_tag(name); !tag.empty()) return std::string(tag);
  if (!has_brace(name)) return std::string(name);
  return std::string(node::slot_tag(node::key_slot(name)));
}

// PREFIX{NAME} for a name without braces (the form every version of dlock used); for one with
// braces PREFIX{TAG}:NAME, in the name's slot and still one key per name. The two forms cannot
// meet: the first has one '}', at the end; the second has one before ':' and NAME after it.
// Appended to `out`: a lock cycle's calls write their keys straight into the call's one buffer
// (node::Strings, lock/calls.cc).
// The caller makes the room (a call's keys reserve theirs at once: lock/calls.cc).
inline void append_auxiliary_key(std::string& out, std::string_view prefix, std::string_view name) {
  if (!has_brace(name)) {
    out.append(prefix);
    out.push_back('{');
    out.append(name);
    out.push_back('}');
    return;
  }
  const std::string tag = cluster_tag(name);
  out.reserve(out.size() + prefix.size() + tag.size() + name.size() + 3);
  out.append(prefix);
  out.push_back('{');
  out.append(tag).append("}:").append(name);
}

// Built in one allocation.
inline std::string auxiliary_key(std::string_view prefix, std::string_view name) {
  std::string key;
  key.reserve(prefix.size() + name.size() + 2);  // enough unless `name` has braces
  append_auxiliary_key(key, prefix, name);
  return key;
}

// What every key and prefix of dlock's below starts with (KeysTest checks it): a lock name that
// does not is none of them (names_a_dlock_key).
inline constexpr std::string_view kDlockKeyPrefix = "dlock:";

// The prefixes of the auxiliary keys below, for append_auxiliary_key.
inline constexpr std::string_view kFencePrefix = "dlock:fence:";
inline constexpr std::string_view kReadersPrefix = "dlock:readers:";
inline constexpr std::string_view kWritersWaitingPrefix = "dlock:writers-waiting:";
inline constexpr std::string_view kPermitsPrefix = "dlock:permits:";
inline constexpr std::string_view kQueuePrefix = "dlock:queue:";
inline constexpr std::string_view kQueueAlivePrefix = "dlock:queue-alive:";
inline constexpr std::string_view kReleasePrefix = "dlock:release:";

// The fencing counter of `name`. It expires with the lock: the floor below carries its value
// into the next counter, so Redis keeps nothing for a name that is no longer locked.
inline std::string fence_key(std::string_view name) {
  return auxiliary_key(kFencePrefix, name);
}

// Node keys (node::Call::node_keys): one per node, not one per name. On a Redis Cluster each
// exists once per slot (node/node_keys.h): a script can reach only keys of the slot of the lock
// it works on.

// The largest fencing token this node handed out or was raised to, for any name. A new counter
// starts from it (see acquire.lua).
inline constexpr std::string_view kFenceFloorKey = "dlock:fence-floor";

// The lock ttls (ms) this node knows of (hello.lua, acquire.lua).
inline const std::string kMaxTtlKey("dlock:max-ttl");

// The boot identities this node was told of (hello.lua, lock/membership.h).
inline const std::string kBootsKey("dlock:boots");

// Whether `name` is one of the node keys above, or a Redis Cluster slot's copy of one
// (KEY:{TAG}, node/node_keys.h): a lock by that name would be written over dlock's own
// bookkeeping on a node, and every script that reads it there would fail from then on.
inline bool names_a_node_key(std::string_view name) {
  if (!name.starts_with(kDlockKeyPrefix)) return false;  // most names: one comparison
  for (const std::string_view key :
       {kFenceFloorKey, std::string_view(kMaxTtlKey), std::string_view(kBootsKey)}) {
    if (name.substr(0, key.size()) != key) continue;
    if (name.size() == key.size() || name[key.size()] == ':') return true;
  }
  return false;
}

inline constexpr std::string_view kAcceptedPrefix = "dlock:accepted:";

inline std::string accepted_token_key(std::string_view key) {
  return auxiliary_key(kAcceptedPrefix, key);
}

// Whether a lock by the name `name` would be one of dlock's own keys: a node key above, or a key
// dlock keeps for some name (its fencing counter, readers, waiting writers, fair queue, a
// semaphore's permit record, FencedStore's accepted token). Such a lock would be written over,
// or deleted, by the scripts of the name it belongs to: a grant of "A" took the counter
// dlock:fence:{A} away, another client's lock by that name with it (two holders).
inline bool names_a_dlock_key(std::string_view name) {
  if (!name.starts_with(kDlockKeyPrefix)) return false;
  if (names_a_node_key(name)) return true;
  for (const std::string_view prefix :
       {kFencePrefix, kReadersPrefix, kWritersWaitingPrefix, kPermitsPrefix, kQueuePrefix,
        kQueueAlivePrefix, kAcceptedPrefix}) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

// The read holds of `name` (dlock::SharedMutex): a zset "HOLD_ID OWNER" -> expiry (ms, the
// node's clock). The key itself expires with its longest-lived reader.
inline std::string readers_key(std::string_view name) {
  return auxiliary_key(kReadersPrefix, name);
}

// Writers waiting for the readers of `name` to leave: a zset owner -> deadline (ms, the node's
// clock). New readers stay out while it has a live member (no writer starvation).
inline std::string writers_waiting_key(std::string_view name) {
  return auxiliary_key(kWritersWaitingPrefix, name);
}

// Slot i of the semaphore `name` (dlock::Semaphore): an ordinary lock of its own, named
// dlock:sem:{NAME}:i, or dlock:sem:{TAG}:NAME:i if NAME has braces (as in auxiliary_key): every
// slot, its queue and its channel share the semaphore's Redis Cluster slot.
inline std::string semaphore_slot(std::string_view name, std::size_t i) {
  return auxiliary_key("dlock:sem:", name) + ":" + std::to_string(i);
}

// The semaphore a slot name belongs to (the slot name without its ":<digits>" suffix), or
// empty for any other name. NAME may itself hold '{', '}' or ':': the suffix is parsed from
// the right.
inline std::string_view semaphore_of_slot(std::string_view name) {
  constexpr std::string_view kPrefix = "dlock:sem:{";
  if (name.substr(0, kPrefix.size()) != kPrefix) return {};
  const auto colon = name.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == name.size()) return {};
  // The tag's '}' must come before the suffix ("dlock:sem:{x:1" is no slot), and the tag must
  // not be empty: "dlock:sem:{}x:5" hashes as a whole, so a queue named after "dlock:sem:{}x"
  // would be in another slot than the lock (every script on it would fail with CROSSSLOT).
  const auto close = name.find('}', kPrefix.size());
  if (close == std::string_view::npos || close == kPrefix.size() || close >= colon) return {};
  for (char c : name.substr(colon + 1)) {
    if (c < '0' || c > '9') return {};
  }
  return name.substr(0, colon);
}

// The permit record of the semaphore a slot name belongs to (empty for any other name): a hash
// n -> the semaphore's permit count, held -> permits granted on the node and not released,
// that lives at least as long as every permit of the semaphore on the node (acquire.lua). In
// the semaphore's slot, beside its queue: dlock:permits:{NAME}:dlock:sem:{NAME}.
inline std::string permit_record_key(std::string_view name) {
  const auto semaphore = semaphore_of_slot(name);
  return semaphore.empty() ? std::string() : auxiliary_key(kPermitsPrefix, semaphore);
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
  return auxiliary_key(kQueuePrefix, queued_as(name));
}

inline std::string queue_alive_key(std::string_view name) {
  return auxiliary_key(kQueueAlivePrefix, queued_as(name));
}

// Where a lock's releases are published, and waiters listen. Every slot of a semaphore shares
// its semaphore's channel: a waiter for a permit hears the release of any slot.
// On a Redis Cluster the channel is a shard channel (SSUBSCRIBE), in the lock's slot.
inline std::string release_channel(std::string_view name) {
  return auxiliary_key(kReleasePrefix, queued_as(name));
}

}  // namespace dlock::lock

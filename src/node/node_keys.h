// SPDX-License-Identifier: MIT
// The keys a lock node keeps once for all lock names (not one per name): the fence floor, the
// largest ttl, the boot records (lock/keys.h, lock/membership.h say what they hold). On a Redis
// Cluster a script reaches only the keys of one slot, so there each exists once per slot.
#pragma once

#include <string>
#include <string_view>

#include "node/slots.h"

namespace dlock::node {

inline constexpr std::string_view kFenceFloorKey = "dlock:fence-floor";
inline constexpr std::string_view kMaxTtlKey = "dlock:max-ttl";
inline constexpr std::string_view kBootsKey = "dlock:boots";

inline bool is_node_key(std::string_view key) {
  return key == kFenceFloorKey || key == kMaxTtlKey || key == kBootsKey;
}

// The cluster's copy of a node key for `slot`: dlock:fence-floor:{TAG}, TAG the slot's tag.
inline std::string node_key_in_slot(std::string_view key, std::uint16_t slot) {
  return std::string(key) + ":{" + std::string(slot_tag(slot)) + "}";
}

}  // namespace dlock::node

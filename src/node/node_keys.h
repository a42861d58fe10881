// SPDX-License-Identifier: MIT
// Node keys: keys that exist once per node, not once per lock name (node::Call::node_keys says
// which keys of a call they are; lock/keys.h names them). On a Redis Cluster a script reaches
// only the keys of one slot, so there each exists once per slot, under the name made here.
#pragma once

#include <string>
#include <string_view>

#include "node/slots.h"

namespace dlock::node {

// The cluster's copy of a node key for `slot`: KEY:{TAG}, TAG the slot's tag.
inline std::string node_key_in_slot(std::string_view key, std::uint16_t slot) {
  return std::string(key) + ":{" + std::string(slot_tag(slot)) + "}";
}

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
// Names of the Redis keys and channels that belong to one lock name. The lock key is the name
// itself; auxiliary ones embed it in a hash tag so they share its Redis Cluster slot.
#pragma once

#include <string>
#include <string_view>

namespace dlock::lock {

inline std::string fence_key(std::string_view name) {
  return "dlock:fence:{" + std::string(name) + "}";
}

inline std::string accepted_token_key(std::string_view key) {
  return "dlock:accepted:{" + std::string(key) + "}";
}

inline std::string queue_key(std::string_view name) {
  return "dlock:queue:{" + std::string(name) + "}";
}

inline std::string queue_alive_key(std::string_view name) {
  return "dlock:queue-alive:{" + std::string(name) + "}";
}

inline std::string release_channel(std::string_view name) {
  return "dlock:release:{" + std::string(name) + "}";
}

}  // namespace dlock::lock

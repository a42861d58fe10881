// SPDX-License-Identifier: MIT
// Redis Cluster hash slots: which of the 16384 slots a key (or shard channel) belongs to, and a
// short name for each slot, for keys that must live in a given slot.
#pragma once

#include <cstdint>
#include <string_view>

namespace dlock::node {

inline constexpr std::uint16_t kSlotCount = 16384;

// The key's hash tag as Redis Cluster reads it: what lies between the first '{' and the first
// '}' after it, if that is not empty; otherwise empty (the whole key is hashed).
std::string_view hash_tag(std::string_view key) noexcept;

// CRC16 (XMODEM) of the key's hash tag, or of the whole key without one, modulo 16384: the
// slot Redis Cluster stores the key in.
std::uint16_t key_slot(std::string_view key) noexcept;

// A short tag of [0-9a-z] that hashes to `slot`: "{" + slot_tag(s) + "}..." is a key of slot s.
// The first such string in counting order (0, 1, ..., z, 00, 01, ...): every client, whatever
// its version, names the same keys for a slot.
std::string_view slot_tag(std::uint16_t slot);

}  // namespace dlock::node

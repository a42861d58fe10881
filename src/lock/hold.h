// SPDX-License-Identifier: MIT
// Hold: one owner's possession of one lock name, as this client took it. On the nodes a hold is
// the field owner -> hold id of the lock key; the hold id is new for every acquisition that is
// not reentrant, so a release or renewal meant for an older hold (a late reply, a lease that
// had expired) can never act on a newer one. Reentrant leases of the same owner share one hold
// (lock/holds.h counts them); the last one to end releases it.
#pragma once

#include <dlock/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {
struct LeaseState;
}  // namespace dlock::detail

namespace dlock::lock {

// A write hold excludes every other hold (Mutex, and SharedMutex's lock()); read holds
// (SharedMutex's lock_shared()) exclude only write holds. On the nodes a write hold is a field of
// the lock key, a read hold a member of dlock:readers:{NAME} (src/scripts/acquire.lua).
enum class HoldKind { write, read };

// Which hold a call is about. An empty id in a release means whatever hold the owner has.
struct HoldId {
  std::string name;
  OwnerToken owner;
  std::string id;
  HoldKind kind = HoldKind::write;
};

// The script argument that names a kind.
inline const char* kind_arg(HoldKind kind) {
  return kind == HoldKind::read ? "r" : "w";
}

// The key of Holds' entry of (name, owner, kind); the hold id is not part of it. "LEN:NAME"
// then the kind's one letter, then the owner: names and owners may hold any byte (NUL too), so
// only the name's length keeps two different triples from meeting in one key (with separators,
// ("a\0r\0b", w, "c") and ("a", r, "b\0w\0c") did, and the second joined the first's hold
// unasked). HoldsTest.EntryKeysOfDifferentTriplesDiffer tries every short triple.
std::string hold_entry_key(std::string_view name, const OwnerToken& owner, HoldKind kind);
// The same, written into `key` (Holds reuses one buffer's capacity).
void write_hold_entry_key(std::string& key, std::string_view name, const OwnerToken& owner,
                          HoldKind kind);

struct Hold {
  Hold(HoldId hold_id, FencingToken token) : id(std::move(hold_id)), fence(token) {}

  const HoldId id;
  const FencingToken fence;  // every lease of the hold hands out this token
  // Set once a renewal found the hold gone from a quorum: every lease of it is lost.
  std::atomic<bool> lost{false};
  // The leases sharing the hold, guarded by the Holds entry of (name, owner).
  std::vector<std::weak_ptr<detail::LeaseState>> leases;
};

}  // namespace dlock::lock

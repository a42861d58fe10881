// SPDX-License-Identifier: MIT
// Holds: this client's holds, at most one current hold per (name, owner, kind), and the leases that
// share it. This is where reentrancy is decided: an acquisition is reentrant only when this
// client has a live lease of the same name and owner, never because a node says the owner is
// there (a hold left on a node by a lost release is stale, and is taken over by a new hold with
// a new fencing token).
//
// A reentrant acquisition makes the shared key outlive its own ttl on a quorum (a renewal that
// never shortens) and shares the hold's fencing token; nothing needs undoing if it fails. The
// last lease of a hold to end releases it on the nodes. Acquisitions and releases of one
// (name, owner) are serialized here, so a reentrant acquisition cannot race the release of the
// hold it joins.
//
// Thread-safety: the blocking members may be called from any thread but an io thread; the
// Tasks (engine/task.h) from anywhere. An entry's AsyncMutex is held across node round trips
// (a waiting Task suspends, it does not block); mu_ and a lease's mutex are only held briefly,
// never across a round trip.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "engine/async_mutex.h"
#include "engine/task.h"
#include "lock/hold.h"
#include "lock/lease_state.h"
#include "lock/quorum_lock.h"

namespace dlock::lock {

class Holds {
 public:
  explicit Holds(QuorumLock& lock);

  // Adds `lease` (its hold not yet set) as a lease of `owner` on `name`: joins this client's
  // live hold, or takes a new one. On success lease->hold and lease->valid_until are set.
  // A write acquisition by an owner that holds a read hold of the name in this client is
  // refused with errc::invalid_argument: an upgrade would wait for its own read hold forever.
  std::optional<Refused> acquire(const std::shared_ptr<detail::LeaseState>& lease,
                                 const std::string& name, const OwnerToken& owner,
                                 std::chrono::milliseconds ttl,
                                 const std::optional<FairTicket>& fair,
                                 HoldKind kind = HoldKind::write, WriterWait writer = {},
                                 ReplicaGuard guard = {}, std::size_t permits = 0);
  engine::Task<std::optional<Refused>> acquire_task(std::shared_ptr<detail::LeaseState> lease,
                                                    std::string name, OwnerToken owner,
                                                    std::chrono::milliseconds ttl,
                                                    std::optional<FairTicket> fair,
                                                    HoldKind kind = HoldKind::write,
                                                    WriterWait writer = {}, ReplicaGuard guard = {},
                                                    std::size_t permits = 0);

  // What ending one lease did.
  struct Ended {
    bool last = false;      // it was the hold's last lease: the hold was released on the nodes
    Result<void> released;  // the outcome of that release (ok when not last)
    std::size_t listeners = 0;
  };
  // Ends `lease` (already marked released by the caller). With `release` false (a detached
  // lease) the last lease of a hold forgets it here without touching the nodes: the lock stays
  // there until its ttl ends or its owner releases it by name.
  Ended end(const std::shared_ptr<detail::LeaseState>& lease, bool release = true);
  engine::Task<Ended> end_task(std::shared_ptr<detail::LeaseState> lease, bool release = true);

  // The owner's hold of `name` of `kind` was released by owner name (Client::unlock,
  // unlock_shared): this client's leases of it are lost.
  void forget(const std::string& name, const OwnerToken& owner, HoldKind kind = HoldKind::write);
  engine::Task<bool> forget_task(std::string name, OwnerToken owner, HoldKind kind);

  // How many (name, owner) entries are kept (for tests: none once every lease ended).
  std::size_t entries();

 private:
  struct Entry {
    explicit Entry(engine::AsyncMutex::Post post) : mu(std::move(post)) {}
    engine::AsyncMutex mu;          // serializes acquire and end for one (name, owner)
    std::shared_ptr<Hold> current;  // guarded by mu
    std::size_t users = 0;          // guarded by Holds::mu_: calls inside or waiting
    bool keep = false;  // guarded by Holds::mu_: the current hold has leases (set under mu)
    const std::string* key = nullptr;  // its key in entries_ (set once, under Holds::mu_)
    HoldKind kind = HoldKind::write;   // the kind in its key (set with it)
  };
  // A reentrant acquisition: `lease` joins `hold` (live until `until`) once the key outlives
  // its ttl too, on a quorum. nullopt with lease->hold unset: the hold is gone or over, and a
  // new one is to be taken.
  engine::Task<std::optional<Refused>> join_task(std::shared_ptr<detail::LeaseState> lease,
                                                 std::shared_ptr<Hold> hold, std::string name,
                                                 std::chrono::milliseconds ttl,
                                                 Clock::time_point until);
  std::shared_ptr<Entry> enter(std::string_view name, const OwnerToken& owner, HoldKind kind);
  using Entries = std::unordered_map<std::string, std::shared_ptr<Entry>>;
  // A new entry for key_ (of `kind`), made from a spare that nothing else holds. Under mu_.
  Entries::iterator add_locked(HoldKind kind);
  // At the end of a call, still under e->mu: whether the entry must be kept when unused.
  void settle(Entry& e);
  // After a call, without e->mu: drops the entry when nobody uses it and it holds nothing.
  void leave(const std::shared_ptr<Entry>& e);
  // Whether `owner` has a hold of `kind` on `name` here with leases.
  bool has(const std::string& name, const OwnerToken& owner, HoldKind kind);
  // The latest end of validity among the live leases of `hold`; nullopt if none is live.
  static std::optional<Clock::time_point> live_until(const Hold& hold);
  std::string next_hold_id();

  QuorumLock& lock_;
  const std::string id_prefix_;  // random per client: hold ids differ across clients
  std::atomic<std::uint64_t> next_id_{0};
  std::mutex mu_;
  Entries entries_;  // guarded by mu_
  std::string key_;  // guarded by mu_: the key being looked up (its capacity reused)
  // How many entries of read holds are kept (Entry::keep); changed under mu_. While none is,
  // the upgrade checks of a write acquisition (two per acquisition) need no lock and no lookup.
  std::atomic<std::size_t> kept_reads_{0};
  // Guarded by mu_: entries erased, each kept whole (its map node, its key's capacity, its
  // Entry) for a new one: an uncontended lock cycle makes one entry and erases it, three
  // allocations each time otherwise (issue 32). Up to kSpares, the latest last: as many as the
  // acquisitions a client keeps in flight (the asio API's 64 took three allocations per cycle
  // with one spare).
  static constexpr std::size_t kSpares = 64;
  std::vector<Entries::node_type> spares_;
};

}  // namespace dlock::lock

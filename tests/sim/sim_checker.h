// SPDX-License-Identifier: MIT
// Checker: the invariants of a schedule, judged against what the clients believe.
//
//   (1) at most one owner per name holds a lease at any instant: a lease is held when its
//       status is held, its hold is not lost and now < valid_until, exactly as
//       LeaseState::held_now() says. Checked when a lease is acquired (against every other
//       lease of the name at that instant) and after every step. Two leases of the same owner in
//       different clients count as two owners; such overlaps are tallied apart
//       (shared_owner), because features.md asks a named owner to be unique among contenders;
//       so are later overlaps of a lease whose hold another client's attempt with the same
//       owner may have taken over (and, if that attempt failed, released).
//   (2) fencing tokens strictly increase per name over the sequence of new holds. A token that
//       did not grow when a majority of the nodes failed between the name's previous new hold
//       and this one (restarted since, or gave no answer to this acquisition) is tallied apart
//       (fence_beyond_minority_failures): docs/features.md promises growth only while at most
//       a minority of nodes fail (die, stall or restart empty) between two acquisitions, a
//       stronger condition than the restart rule mutual exclusion needs (docs/simulation.md).
//   (6) on a lock set of one node, whose counter counts every name (docs/features.md: the next
//       holder of any name gets a larger token): a new hold whose acquisition started after
//       another new hold's acquisition had ended, of any name, has the larger token. Only that
//       order, which the clients see: acquisitions that overlap in time are not ordered. A
//       restart (or failover) of the node since the earlier one ended is outside the promise
//       ("a restart resets the counter": a failover to a lagging replica does) and is tallied
//       as fence_beyond_minority_failures.
//   (7) on a lock set of one node, the tokens the node hands out (acquire.lua's grants, and
//       acquire_batch.lua's in item order, and the native acquisition's at its INCR, where its
//       token is counted: other connections' grants may run before its GET; heard by a client
//       or not: a late call's too) grow
//       strictly in the order the node ran them, one INCR per grant, as acquire_batch.lua
//       promises: the node's own order, which (6) cannot see for the names of one batch call
//       (always in flight together). Across a restart: tallied as for (6).
//   (5) a semaphore never has more live permits than the smallest permit count among their
//       holders, and never two counts in use at once (issue 28: a count other than the one
//       recorded on a node is refused there).
//   (3) a hold's key on any node expires no later than the largest ttl after the later of the
//       end of the attempt that named it and its leases' validity.
//   (4) every key of a name (lock key, fencing counter) expires no later than the largest ttl
//       after the last attempt on or lease of the name; nothing else stays on a node but the
//       fence floor, dlock:boots and dlock:max-ttl. A semaphore's permit record counts as a
//       key of each of its slots.
//       A key that breaks (3) or (4) only because the client extended a lease after its
//       validity had ended (Lease::extend sends renew.lua regardless, re-arming the key where it
//       still lives) is tallied apart (renew_after_expiry): a finding about src, see
//       docs/simulation.md.
// (3) and (4) compare each key's expiry (on its node's drifting clock, in real time) with the
// bound instead of waiting the ttl out: the same verdict, without the wait. The bound is
// widened by the longest delay of a late-run call about the name and a few ms of margin.
#pragma once

#include <dlock/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lock/lease_state.h"
#include "sim/sim_cluster.h"

namespace dlock::sim {

// One lease as the workload holds it (the Lease handle's state, not the handle).
struct LeaseRecord {
  std::size_t id = 0;  // in order of acquisition within the schedule
  std::size_t client = 0;
  std::string name;
  OwnerToken owner;
  bool reentrant = false;
  std::size_t permits = 0;  // a semaphore slot's lease: the permit count its client used
  Clock::time_point acquired_at;
  std::shared_ptr<detail::LeaseState> state;
  Clock::time_point started_at;  // the acquisition began (before the client's first call)
};

struct Violation {
  enum class Kind {
    overlap,
    shared_owner,
    fence,
    token_not_above_earlier_holder_on_one_node,  // (6)
    grant_not_above_earlier_grant_on_one_node,   // (7)
    hold_key,
    name_key,
    renew_after_expiry,
    fence_beyond_minority_failures,
    bookkeeping,
    permits
  };
  // Kinds that are tallied but fail a test only when asked to (DLOCK_SIM_STRICT).
  bool known() const {
    return kind == Kind::shared_owner || kind == Kind::renew_after_expiry ||
           kind == Kind::fence_beyond_minority_failures;
  }
  Kind kind;
  std::string text;
};
const char* kind_name(Violation::Kind k);

class Checker {
 public:
  explicit Checker(std::chrono::milliseconds max_ttl) : max_ttl_(max_ttl) {}

  // Client `client` is about to try `name` as `owner`: another client's lease of the same name
  // and owner that is held now may lose its hold to this attempt (acquire.lua takes over a
  // hold of the same owner, and a failed attempt then releases it): it is usurped.
  void attempting(std::size_t client, const std::string& name, const OwnerToken& owner,
                  const std::vector<LeaseRecord>& all);
  // An acquisition ended at `end`; `touched` are the (name, hold id) its calls named.
  void attempted(const std::string& name,
                 const std::vector<std::pair<std::string, std::string>>& touched,
                 Clock::time_point end);
  // An extend of hold `hold_id` that began after its lease's validity ended, at `end`.
  void renewed_after_expiry(const std::string& name, const std::string& hold_id,
                            Clock::time_point end);
  // `lease` was just acquired: (1) against the other leases at this instant, (2) if new.
  void acquired(const LeaseRecord& lease, const std::vector<LeaseRecord>& all,
                const SimCluster& cluster);
  // After every step: (1) on a snapshot, (3) and (4) on every node.
  void check(const std::vector<LeaseRecord>& all, SimCluster& cluster);
  // A free-form finding (client bookkeeping).
  void report(Violation v) { violations_.push_back(std::move(v)); }

  const std::vector<Violation>& violations() const { return violations_; }

 private:
  void overlaps(const std::vector<const LeaseRecord*>& held, const std::string& when);
  void permit_counts(const LeaseRecord& lease, const std::vector<LeaseRecord>& all);
  void one_node_order(const LeaseRecord& lease, const std::vector<LeaseRecord>& all,
                      const SimCluster& cluster);
  void one_node_grants(SimCluster& cluster);
  void check_node(std::size_t i, SimCluster& cluster, const std::vector<LeaseRecord>& all);
  // The latest valid_until of the leases of `hold_id` (or of `name` when hold_id is empty).
  Clock::time_point validity_of(const std::vector<LeaseRecord>& all, const std::string& name,
                                const std::string& hold_id) const;
  Clock::duration allowance(const SimCluster& cluster, const std::string& name) const;
  // A key that outlives ref + allowance: a violation of `kind`, or renew_after_expiry if an
  // extend begun after validity (its operation ended at `late_ref`) explains it. Each key is
  // reported once.
  void expired_late(Violation::Kind kind, const std::string& what, Clock::time_point expires,
                    Clock::time_point ref, Clock::duration allowance,
                    std::optional<Clock::time_point> late_ref, const SimCluster& cluster);

  const std::chrono::milliseconds max_ttl_;
  std::map<std::string, Clock::time_point> hold_ref_;  // hold id -> end of its attempts
  std::map<std::string, Clock::time_point> name_ref_;  // name -> end of the last attempt
  // The same for extends that began after the lease's validity had ended.
  std::map<std::string, Clock::time_point> late_hold_ref_;
  std::map<std::string, Clock::time_point> late_name_ref_;
  std::set<std::string> reported_keys_;
  std::map<std::string, std::uint64_t> last_token_;         // name -> token of the latest new hold
  std::map<std::string, Clock::time_point> last_hold_;      // name -> when its latest new hold came
  std::set<std::pair<std::size_t, std::size_t>> reported_;  // lease id pairs already reported
  std::optional<SimNode::Grant> last_grant_;  // (7): the latest grant of a one-node set
  // Leases whose hold another client took over by naming the same owner: their overlaps with
  // anyone are consequences of that, tallied as shared_owner.
  std::set<std::size_t> usurped_;
  std::vector<Violation> violations_;
};

// Held by the client's own judgement (LeaseState::held_now) at `now`.
bool held_at(const detail::LeaseState& s, Clock::time_point now);

}  // namespace dlock::sim

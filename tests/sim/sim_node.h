// SPDX-License-Identifier: MIT
// SimNode: an in-memory model of one Redis node running dlock's scripts. Each script is
// re-stated in C++ line by line from its Lua source (src/scripts/*.lua), by the name the client
// calls it by (node::Call::script->name); the plain command INFO answers run_id,
// uptime_in_seconds, the replication state (role, master_replid, second_repl_offset) and the
// eviction policy. Keys expire on the node's own clock, which drifts. A restart wipes the data
// (a node without persistence) and gives the node a new run_id; a failover puts the node's
// replica behind its address, with a lagging copy of the data and a long uptime.
//
// The model is what the simulation trusts in place of Redis: the real scripts are run against
// real servers by the integration tests, not here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "node/call.h"
#include "resp/reply.h"
#include "sim/sim_store.h"

namespace dlock::sim {

// Bugs planted in the model on purpose, so the simulation's self-test can show that each kind
// of violation is caught (a checker that never fails proves nothing).
enum class Mutation {
  none,
  grant_when_held,      // acquire takes the lock from another owner
  no_fence_increment,   // acquire hands out the counter without incrementing it
  triple_ttl,           // acquire and renew arm keys for three times the ttl
  forget_boots,         // hello never reports a boot: restarted nodes vote at once
  promotion_unnoticed,  // INFO hides a promotion (no second_repl_offset): a long uptime
  eviction_unreported,  // INFO hides the eviction policy of a node that evicts
  ignore_permit_count,  // acquire grants a semaphore slot whatever count the node recorded
  // Group commit (acquire_batch.lua), for the sweeps that send batch calls:
  batch_grants_when_held,  // acquire_batch grants a name whose key exists (another holds it)
  batch_reuses_floor,      // acquire_batch hands out the node's floor without incrementing it
  batch_shares_one_token,  // acquire_batch gives every name it grants one token: base + 1
  // A client's, planted in its SimFanout: the record window believes a checked record reaches
  // twice as far as acquire.lua makes it (three ttls), so it skips the check for leases that
  // outlive the record.
  record_window_too_long,
  // The native acquisition's SET without NX (it writes over another's hold).
  native_set_without_nx,
};

class SimNode {
 public:
  SimNode(NodeClock clock, std::string run_id, Mutation mutation = Mutation::none);

  // Runs one script or command at the node's current time and returns its reply. Scripts the
  // simulation does not model (fair mode, inspect) answer an error reply. force_release is
  // modelled for directed schedules (an operator's call to one node); no client sends it.
  resp::Reply execute(const node::Call& call);
  // One plain command of the native acquisition (lock/calls.cc), as the client encoded it (an
  // array of strings): SET NAME "dlock. HOLD_ID OWNER" NX PX ttl (the hold, written into the
  // model's hash owner -> hold id), EXISTS, INCR, GET (a hold read back as its string). Anything
  // else is an error reply.
  resp::Reply command(const resp::Reply& command);
  // The native acquisition's replies were a grant of `token`: counted as a grant that skipped
  // the max-ttl record, in the node's order at its INCR (`at`: grants_count() then), where the
  // token was counted (grants of other calls may have run between the INCR and the GET).
  void native_granted(std::int64_t token, std::size_t at);
  std::size_t grants_count() const { return grants_.size(); }

  // The process dies and comes back empty, with a new identity and uptime 0 (its replica
  // resyncs from it: empty too).
  void restart(std::string run_id);
  // The address now reaches the node's replica, promoted: another process (a new run_id and
  // replication id, and the replica's long uptime) holding what it had replicated, which lags.
  void fail_over(std::string run_id, std::string replid);
  // The replica catches up: a copy of the data as of now.
  void replicate() { replica_ = store_; }
  // A server with maxmemory and a policy that may evict keys with a ttl (volatile-lru); INFO
  // says so (unless the mutation hides it).
  void set_evicting() { evicting_ = true; }
  bool evicting() const { return evicting_; }
  // Evicts one key that has a ttl, chosen by `pick` among them; returns its name, or "".
  std::string evict(std::size_t pick);
  // Review: the address now reaches another server, empty of this set's keys, that has been up
  // for `uptime_ms` (not a promoted replica: no second replication id).
  void replace(std::string run_id, std::int64_t uptime_ms);
  // Review: another server with its own identity and data answers at this address; the one that
  // answered is handed back in `other` (a failback swaps them again).
  struct Server {
    std::string run_id;
    std::int64_t boot_ms = 0;
    Store store;
  };
  void swap_server(Server& other);

  const std::string& run_id() const { return run_id_; }
  // Counts restarts: a request buffered for an earlier process never runs on a later one.
  std::uint64_t generation() const { return generation_; }
  const NodeClock& clock() const { return clock_; }
  std::int64_t now_ms() const { return clock_.now_ms(); }
  // Grants whose acquisition skipped the max-ttl record (ARGV[7] 'nr'/'r': the client's record
  // window), over the node's whole life.
  std::size_t records_skipped() const { return records_skipped_; }
  // The live keys, for the invariant checks.
  const std::map<std::string, Entry>& live_keys() { return store_.live(now_ms()); }
  // A token handed out by a grant (acquire, or an item of acquire_batch in item order), in the
  // order the node ran them, with the generation it ran in; whether or not a client heard it.
  struct Grant {
    std::int64_t token;
    std::uint64_t generation;
  };
  // The grants since the last call, for the checker.
  std::vector<Grant> take_grants() { return std::exchange(grants_, {}); }

 private:
  resp::Reply run_script(const node::Call& call, std::int64_t now);
  resp::Reply acquire(const node::Call& call, std::int64_t now);
  resp::Reply release(const node::Call& call, std::int64_t now);
  // Group commit's scripts: an array with each item's reply, or nil where nothing changed.
  resp::Reply acquire_batch(const node::Call& call, std::int64_t now);
  resp::Reply release_batch(const node::Call& call, std::int64_t now);
  resp::Reply renew(const node::Call& call, std::int64_t now);
  resp::Reply fence_raise(const node::Call& call, std::int64_t now);
  resp::Reply hello(const node::Call& call, std::int64_t now);
  resp::Reply floor_raise(const node::Call& call, std::int64_t now);
  resp::Reply force_release(const node::Call& call, std::int64_t now);
  void count_permit(const std::string& record, const std::string& permits, const std::string& key,
                    std::int64_t added, std::int64_t now);
  // dlock:max-ttl as a hash member -> until (the scripts' zset; a member is a ttl or an
  // announcement "ttl.<digits>"): record, and the largest live ttl.
  void record_ttl(const std::string& key, const std::string& member, std::int64_t live,
                  std::int64_t now);
  std::int64_t live_max_ttl(const std::string& key, std::int64_t now);
  resp::Reply info(std::int64_t now) const;
  // acquire.lua's older_hold_of_this_client(): `id` is an older hold of the client of `mine`.
  static bool older_hold_of_same_client(const std::string& id, const std::string& mine);
  // acquire.lua's counter() and next_token(): the name's counter, or the node's floor, or the
  // clock; a count of kLeastCount or less is none (acquire.lua's count_of()).
  static constexpr std::int64_t kLeastCount = 1'000'000'000'000'000;
  std::optional<std::int64_t> count_of(const std::string& key, std::int64_t now);
  std::int64_t counter(const std::string& fence, const std::string& floor, std::int64_t now);
  void raise_floor(const std::string& floor, std::int64_t token, std::int64_t now);
  // `record`: false when acquire.lua's fast path leaves the max-ttl record alone
  // (fast_path_skips_record()).
  std::int64_t next_token(const node::Call& call, std::int64_t ttl, std::int64_t now,
                          bool record = true);
  bool fast_path_skips_record(const node::Call& call, std::int64_t now);
  // next_token() with the node's counter (ARGV[7] 'n'): the floor plus `step` (INCR, or with no
  // floor the clock in microseconds), above `named` (the largest name counter taken away), set
  // as the floor. acquire.lua's and acquire_batch.lua's.
  std::int64_t node_token(const std::string& floor, std::optional<std::int64_t> named,
                          std::int64_t step, std::int64_t now);
  void record_granted_ttl(const std::string& max_ttl, std::int64_t ttl, std::int64_t now);

  std::int64_t ttl_of(const std::string& arg) const;

  NodeClock clock_;
  const Mutation mutation_;
  std::string run_id_;
  std::string replid_;
  bool promoted_ = false;  // INFO's second_repl_offset is set
  bool evicting_ = false;
  std::int64_t boot_ms_;
  std::int64_t replica_boot_ms_;  // the replica has run an hour before the node (a long uptime)
  Store replica_;
  std::uint64_t generation_ = 0;
  std::size_t records_skipped_ = 0;
  Store store_;
  std::vector<Grant> grants_;
};

}  // namespace dlock::sim

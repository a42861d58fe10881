// SPDX-License-Identifier: MIT
#include "cluster_faults.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <thread>
#include <vector>

#include "node/server_identity.h"
#include "worker.h"

namespace dlock::chaos {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using test::ShardedCluster;

// A failover takes the node timeout (2 s) and an election; a rejoin, a full sync. Far more than
// this means the cluster is stuck: the run goes on, and says so.
constexpr milliseconds kHealLimit{30000};

bool eventually(const std::function<bool()>& done, milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return true;
}

// A field of server i's INFO replication ("role", "master_link_status"), or empty.
std::string replication_field(const ShardedCluster& c, std::size_t i, std::string_view field) {
  auto r = c.command(i, {"INFO", "replication"});
  if (!r || r->type != REDIS_REPLY_STRING) return {};
  return node::info_field(r->str, field);
}

// What server i replied with errors of these kinds so far (INFO errorstats, Redis 7).
Redirects error_replies(const ShardedCluster& c, std::size_t i) {
  Redirects out;
  auto r = c.command(i, {"INFO", "errorstats"});
  if (!r || r->type != REDIS_REPLY_STRING) return out;
  const auto count = [&](std::string_view kind) {
    const std::string v = node::info_field(r->str, "errorstat_" + std::string(kind));
    return v.rfind("count=", 0) == 0 ? std::atol(v.c_str() + 6) : 0L;  // "count=12"
  };
  out.ask = count("ASK");
  out.tryagain = count("TRYAGAIN");
  out.moved = count("MOVED");
  return out;
}

std::string server_name(ShardedCluster& c, std::size_t i) {
  return "server-" + std::to_string(i + 1) + " (:" + std::to_string(c.server(i).port()) + ")";
}

void complain(const std::string& name, const std::string& what) {
  std::cerr << "dlock_chaos: " << name << ": " << what << "\n";
}

// Waits until every slot is served and the running servers agree, and, if `rejoined` is set,
// until that server replicates a master again.
void wait_until_whole(ShardedCluster& c, const std::string& name, std::size_t rejoined) {
  if (rejoined != ShardedCluster::npos &&
      !eventually([&] { return replication_field(c, rejoined, "master_link_status") == "up"; },
                  kHealLimit)) {
    complain(name, server_name(c, rejoined) + " did not rejoin as a synced replica in time");
  }
  if (!c.wait_until_stable(kHealLimit)) complain(name, "the servers did not agree in time");
}

// The master to fail over (the master of the slot, or another) and its replica; nullopt if that
// replica is not synced. A master is never failed over without a replica to take over, and a
// promoted replica holds what replication gave it (or, lossy, a bit less).
std::optional<std::pair<std::size_t, std::size_t>> pick_failover(const ShardedCluster& c,
                                                                 const FailoverPlan& plan,
                                                                 std::size_t slot_master) {
  std::size_t victim = slot_master;
  if (!plan.slot_master) {
    auto others = c.masters();
    std::erase(others, slot_master);
    if (others.empty()) return std::nullopt;
    victim = others[plan.pick % others.size()];
  }
  if (victim == ShardedCluster::npos) return std::nullopt;
  std::size_t replica = ShardedCluster::npos;
  try {
    replica = c.replica_of(victim);
  } catch (const std::exception&) {
    // The master did not answer CLUSTER MYID within 2 s (seen once on a machine with a load of
    // 20: the exception ended the whole run): nothing was done yet, so no fault this time.
    return std::nullopt;
  }
  if (replica == ShardedCluster::npos ||
      replication_field(c, replica, "master_link_status") != "up") {
    return std::nullopt;
  }
  return std::pair{victim, replica};
}

}  // namespace

void sync_replicas_at_once(ShardedCluster& c, std::size_t server) {
  (void)c.command(server, {"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
}

std::optional<Fault> fail_over(ShardedCluster& c, const std::string& name,
                               const FailoverPlan& plan) {
  const std::size_t slot_master = c.master_of_slot(plan.slot);
  const auto pair = pick_failover(c, plan, slot_master);
  if (!pair) return std::nullopt;
  const auto [victim, replica] = *pair;
  const bool lossy = plan.lag > milliseconds(0);
  Fault f;
  f.kind = plan.freeze ? "freeze-master" : lossy ? "failover-lossy" : "failover";
  f.target = name + " " + server_name(c, victim) +
             (victim == slot_master ? " (the lock's master)" : "") + " to " +
             server_name(c, replica) +
             (lossy ? ", replica cut off " + std::to_string(plan.lag.count()) + "ms before" : "");
  f.start_ns = real_now_ns();
  if (lossy) {
    // The replica stops and loses its link; what the master writes meanwhile never reaches it.
    c.server(replica).pause();
    (void)c.command(victim, {"CLIENT", "KILL", "TYPE", "replica"});
    std::this_thread::sleep_for(plan.lag);
  }
  if (plan.freeze) {
    c.server(victim).pause();
  } else {
    c.server(victim).kill9();
  }
  if (lossy) c.server(replica).resume();
  if (!eventually([&] { return replication_field(c, replica, "role") == "master"; }, kHealLimit)) {
    complain(name, server_name(c, replica) + " was not promoted in time");
  }
  if (plan.freeze) {
    // It wakes up still believing it serves its slots, with the requests clients sent it
    // meanwhile waiting on its sockets; the cluster bus tells it that it was replaced.
    std::this_thread::sleep_for(plan.thawed_after);
    c.server(victim).resume();
  } else {
    if (!c.wait_until_stable(kHealLimit)) complain(name, "no agreement after the promotion");
    // Back empty (no persistence) but with its nodes.conf: it learns it was replaced and syncs
    // from the promoted replica.
    if (auto restarted = c.server(victim).restart(/*keep_data=*/true); !restarted) {
      complain(name, server_name(c, victim) + " did not restart: " + restarted.error().message());
      return f;
    }
    sync_replicas_at_once(c, victim);  // for when it is promoted again
  }
  wait_until_whole(c, name, victim);
  return f;
}

std::optional<Fault> reshard(ShardedCluster& c, const std::string& name, const ReshardPlan& plan,
                             Redirects& seen) {
  const std::size_t from = c.master_of_slot(plan.slot);
  auto others = c.masters();
  std::erase(others, from);
  if (from == ShardedCluster::npos || others.empty()) return std::nullopt;
  const std::size_t to = others[plan.pick % others.size()];
  Fault f;
  f.kind = "reshard";
  f.target = name + " slot " + std::to_string(plan.slot) + " " + server_name(c, from) + " to " +
             server_name(c, to);
  f.start_ns = real_now_ns();
  const Redirects before = error_replies(c, from);
  try {
    c.begin_migration(plan.slot, to);
    std::this_thread::sleep_for(plan.migrating);
    c.migrate_keys(plan.slot, to);
    std::this_thread::sleep_for(plan.migrated);
    c.finish_migration(plan.slot, to);
  } catch (const std::exception& e) {
    // Not finished: handing over a slot whose keys did not all move would drop them, and a
    // lost lock key there would be the harness's doing, not the library's.
    complain(name, "moving slot " + std::to_string(plan.slot) + " failed: " + e.what());
  }
  wait_until_whole(c, name, ShardedCluster::npos);
  const Redirects after = error_replies(c, from);
  const Redirects got{after.ask - before.ask, after.tryagain - before.tryagain,
                      after.moved - before.moved};
  f.target += ": ASK " + std::to_string(got.ask) + ", TRYAGAIN " + std::to_string(got.tryagain) +
              ", MOVED " + std::to_string(got.moved);
  seen.ask += got.ask;
  seen.tryagain += got.tryagain;
  seen.moved += got.moved;
  return f;
}

std::optional<Fault> stop_master(ShardedCluster& c, const std::string& name, unsigned pick,
                                 milliseconds hold) {
  const auto masters = c.masters();
  if (masters.empty()) return std::nullopt;
  const std::size_t victim = masters[pick % masters.size()];
  Fault f;
  f.kind = "stop-master";
  f.target = name + " " + server_name(c, victim);
  f.start_ns = real_now_ns();
  c.server(victim).pause();
  std::this_thread::sleep_for(hold);
  c.server(victim).resume();
  return f;
}

}  // namespace dlock::chaos

// SPDX-License-Identifier: MIT
// The chaos runner's faults on a Redis Cluster lock node (--cluster, nodes.h), each on one
// cluster while the workers hold and wait for the lock:
//
// - failover: kill -9 a master that has a synced replica; the replica is promoted (the cluster's
//   boot identity changes, so the cluster node sits out of quorums for the largest ttl); then
//   the killed server is restarted, empty but with its nodes.conf, and rejoins as a replica of
//   the promoted one. Every master keeps a replica, so the next failover has one to promote.
// - failover-lossy: the same, but the replica is first stopped and cut off from its master for
//   a while, so the writes of that time (grants, fencing counters, the slot's fence floor) are
//   lost in the failover.
// - freeze-master: SIGSTOP a master with a synced replica until the replica is promoted, then
//   SIGCONT it: a stalled (not dead) master that wakes up as the old master, with requests
//   queued, until the cluster bus tells it that it was replaced; then it syncs as a replica.
// - reshard: a slot moves to another master in the steps of `redis-cli --cluster reshard`:
//   MIGRATING/IMPORTING (requests meet ASK and TRYAGAIN), the keys moved by MIGRATE (ASK), then
//   the slot handed over (MOVED).
// - stop-master: SIGSTOP a master for less than the cluster's node timeout: a slow shard, no
//   failover.
//
// Each returns once the cluster is whole again (every slot served, all servers agree, the
// restarted server synced), or after a bounded wait that it reports on stderr; nullopt when the
// fault could not be made (no synced replica to promote).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "history.h"
#include "support/sharded_cluster.h"

namespace dlock::chaos {

struct FailoverPlan {
  std::uint16_t slot = 0;
  bool slot_master = true;  // kill the master of `slot`, else another master (by `pick`)
  unsigned pick = 0;
  // > 0: how long the replica is stopped and cut off before its master dies (failover-lossy).
  std::chrono::milliseconds lag{0};
  // SIGSTOP instead of kill -9 (freeze-master); SIGCONT this long after the promotion.
  bool freeze = false;
  std::chrono::milliseconds thawed_after{0};
};

struct ReshardPlan {
  std::uint16_t slot = 0;
  unsigned pick = 0;                         // which other master gets the slot
  std::chrono::milliseconds migrating{500};  // keys still on the old master: ASK, TRYAGAIN
  std::chrono::milliseconds migrated{300};   // keys on the new one, slot not handed over: ASK
};

// Makes `server` start a replica's full sync at once, not after Redis's default 5 s wait for
// more replicas (repl-diskless-sync-delay): a killed master is back as a synced replica, ready
// for the next failover, in about a second. For every server at start and after a restart.
void sync_replicas_at_once(test::ShardedCluster& cluster, std::size_t server);

// Error replies of the old master during reshards (INFO errorstats): proof that the workers'
// requests met the migration. ASK and TRYAGAIN come while the slot migrates, MOVED after.
struct Redirects {
  long ask = 0;
  long tryagain = 0;
  long moved = 0;
};

// `name` ("cluster-2") prefixes the fault's target.
std::optional<Fault> fail_over(test::ShardedCluster& cluster, const std::string& name,
                               const FailoverPlan& plan);
// Adds what the old master replied to `seen`, and to the fault's target.
std::optional<Fault> reshard(test::ShardedCluster& cluster, const std::string& name,
                             const ReshardPlan& plan, Redirects& seen);
std::optional<Fault> stop_master(test::ShardedCluster& cluster, const std::string& name,
                                 unsigned pick, std::chrono::milliseconds hold);

}  // namespace dlock::chaos

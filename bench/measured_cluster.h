// SPDX-License-Identifier: MIT
// MeasuredCluster: a Redis Cluster on loopback for the benchmark's cluster section, of one
// master or of three or more, with what the section reads and does to it: each master's
// counters (INFO), and a slot moved to another master the way `redis-cli --cluster reshard`
// moves one (to make a client's slot map stale).
//
// redis-cli --cluster create wants at least 3 masters (sandbox::LocalCluster), so a 1-master
// cluster is one server started with --cluster-enabled yes that takes all 16384 slots itself
// (CLUSTER ADDSLOTSRANGE 0 16383): a real cluster to the client (CLUSTER SLOTS, routing by
// slot), with one master to route to.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "local_cluster.h"
#include "redis_process.h"
#include "workloads.h"

namespace dlock::bench {

// One master's counters since it started.
struct MasterCounters {
  double cpu_seconds = 0;      // INFO cpu: used_cpu_user + used_cpu_sys
  long long script_calls = 0;  // INFO commandstats: evalsha + eval calls
  long long moved = 0;         // INFO errorstats: MOVED replies sent
};

class MeasuredCluster {
 public:
  // Starts the servers in `dir` (created if missing); throws std::runtime_error. A 1-master
  // cluster returns at once, before it is ready (wait_until_ready): Redis keeps a fresh master's
  // cluster_state at fail for its first 2 s, time better spent starting another cluster.
  static std::unique_ptr<MeasuredCluster> start(const std::filesystem::path& dir,
                                                std::size_t masters);
  // Returns once cluster_state is ok; throws after 30 s.
  void wait_until_ready() const;

  std::string url() const;  // redis-cluster://127.0.0.1:PORT
  const Ports& masters() const noexcept { return masters_; }

  std::vector<MasterCounters> counters() const;
  // For every slot, the index (into masters()) of the master that serves it.
  std::vector<std::size_t> slot_owners() const;
  // The slot of `key`, as the cluster computes it (CLUSTER KEYSLOT).
  std::uint16_t key_slot(const std::string& key) const;
  // Moves `slot` and its keys to master `to`: IMPORTING/MIGRATING, MIGRATE, then SETSLOT NODE
  // on every master, so that from then on every master answers MOVED for it but `to`.
  void move_slot(std::uint16_t slot, std::size_t to) const;

 private:
  MeasuredCluster() = default;
  std::string id(std::size_t master) const;  // CLUSTER MYID

  std::unique_ptr<sandbox::LocalCluster> cluster_;  // three masters or more
  std::unique_ptr<sandbox::RedisProcess> single_;   // or one
  Ports masters_;
};

}  // namespace dlock::bench

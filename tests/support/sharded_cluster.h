// SPDX-License-Identifier: MIT
// ShardedCluster: a real Redis Cluster for tests (sandbox::LocalCluster: redis-server processes in
// cluster mode joined by `redis-cli --cluster create`), with what tests do to one: find the
// master of a key, move a slot step by step (MOVED and ASK), kill a master and wait for its
// replica to take over.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "local_cluster.h"
#include "support/redis_server.h"

namespace dlock::test {

class ShardedCluster {
 public:
  static constexpr std::size_t npos = ~std::size_t{0};

  // Throws std::runtime_error if the cluster does not form.
  explicit ShardedCluster(std::size_t masters = 3, std::size_t replicas = 0,
                          std::string password = {});
  ~ShardedCluster();
  ShardedCluster(const ShardedCluster&) = delete;
  ShardedCluster& operator=(const ShardedCluster&) = delete;

  std::string url() const { return cluster_->url(); }  // redis-cluster://127.0.0.1:PORT
  std::size_t size() const { return cluster_->size(); }
  sandbox::RedisProcess& server(std::size_t i) { return cluster_->server(i); }

  // A command on server i (a fresh hiredis connection), or null if it does not answer.
  ReplyPtr command(std::size_t i, const std::vector<std::string>& args) const;
  std::string id(std::size_t i) const;  // CLUSTER MYID

  // The server that serves `slot` as a running server sees it (npos: none).
  std::size_t master_of_slot(std::uint16_t slot) const;
  std::size_t master_of(const std::string& key) const;
  std::vector<std::size_t> masters() const;  // running servers with the master role and slots
  // The key exists on its master.
  bool exists(const std::string& key) const;
  // Waits until server i's replicas have everything it wrote so far (false after 10 s).
  bool replicated(std::size_t i) const;
  // The replica (running, replicating `master`), or npos.
  std::size_t replica_of(std::size_t master) const;

  // Moving a slot to master `to`, in the steps of `redis-cli --cluster reshard`: from
  // begin_migration until finish_migration requests for keys of the slot meet ASK (and
  // TRYAGAIN); after it, MOVED.
  void begin_migration(std::uint16_t slot, std::size_t to);
  void migrate_keys(std::uint16_t slot, std::size_t to);
  // One key of a migrating slot to `to` (MIGRATE): the slot's keys are then split between the
  // two masters, and a script naming keys on both sides is answered TRYAGAIN.
  void migrate_key(const std::string& key, std::size_t to);
  void finish_migration(std::uint16_t slot, std::size_t to);
  void move_slot(std::uint16_t slot, std::size_t to);
  // Gives `slot` to master `to` without its keys, as an operator who runs CLUSTER SETSLOT ...
  // NODE without MIGRATE does: `to` claims it with a new config epoch, the other masters
  // agree, and the old owner (which refuses while it holds keys of the slot) is overruled by
  // the cluster bus and drops them (Redis deletes the keys of a slot a master lost).
  void reassign_slot_without_keys(std::uint16_t slot, std::size_t to);

  // Restarts master i (empty, with its cluster identity) with its wall clock `shift` ahead
  // (negative: behind) of everyone else's, as TIME and key expiry see it: a preloaded library
  // (support/clock_shift.cc). Waits until the cluster is stable again; throws if it is not.
  void shift_clock(std::size_t i, std::chrono::milliseconds shift);
  // Server i's clock (TIME) in ms since the epoch, or -1.
  long long time_ms(std::size_t i) const;

  // Waits until every running server says cluster_state:ok and agrees on the slot map.
  bool wait_until_stable(std::chrono::milliseconds limit = std::chrono::seconds(30)) const {
    return cluster_->wait_until_stable(limit);
  }

 private:
  std::filesystem::path dir_;
  std::string password_;
  std::unique_ptr<sandbox::LocalCluster> cluster_;
};

}  // namespace dlock::test

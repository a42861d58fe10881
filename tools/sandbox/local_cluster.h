// SPDX-License-Identifier: MIT
// LocalCluster: a Redis Cluster of local redis-server processes on loopback, made the way users
// make one (`redis-cli --cluster create`): M masters with R replicas each, for `dlock sandbox
// --cluster` and the tests. Everything it starts it stops, by pid.
#pragma once

#include <dlock/result.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "redis_process.h"

namespace dlock::sandbox {

struct LocalClusterOptions {
  std::size_t masters = 3;
  std::size_t replicas = 0;  // per master
  // How long a master may be unreachable before its replica takes over (cluster-node-timeout).
  std::chrono::milliseconds node_timeout{2000};
  std::vector<std::string> extra_args;  // for every server, e.g. {"--requirepass", "secret"}
  std::string password;                 // what the cluster's own commands use
};

class LocalCluster {
 public:
  // Starts the servers in `dir` (which must exist) and joins them; returns once every node says
  // cluster_state:ok and every slot has a master. Errors: no redis-server or redis-cli, a
  // server that does not start, a cluster that does not form in 30 s.
  static Result<std::unique_ptr<LocalCluster>> start(std::filesystem::path dir,
                                                     LocalClusterOptions options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // redis-cluster://127.0.0.1:PORT of the first server (any one names the whole cluster).
  std::string url() const;
  std::size_t size() const noexcept { return servers_.size(); }
  RedisProcess& server(std::size_t i) { return *servers_[i]; }
  const LocalClusterOptions& options() const noexcept { return options_; }

  // Waits until every running server says cluster_state:ok and agrees on who serves every slot
  // (false after `limit`).
  bool wait_until_stable(std::chrono::milliseconds limit) const;
  // Waits until every replica it was made with finished its first sync (false after `limit`).
  bool wait_for_replicas(std::chrono::milliseconds limit) const;

 private:
  LocalCluster(std::filesystem::path dir, LocalClusterOptions options)
      : dir_(std::move(dir)), options_(std::move(options)) {}
  std::filesystem::path dir_;
  LocalClusterOptions options_;
  std::vector<std::unique_ptr<RedisProcess>> servers_;
};

}  // namespace dlock::sandbox

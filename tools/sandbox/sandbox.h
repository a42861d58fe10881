// SPDX-License-Identifier: MIT
// Sandbox: N local lock nodes on loopback in a temporary folder: somewhere to try dlock with no
// infrastructure. Each node is a redis-server, a Redis Cluster (LocalCluster) or a master with
// replicas and sentinels (LocalSentinel). Everything it starts it stops, and the folder goes
// with it.
#pragma once

#include <dlock/result.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "local_cluster.h"
#include "local_sentinel.h"
#include "redis_process.h"

namespace dlock::sandbox {

class Sandbox {
 public:
  // Starts `nodes` servers on ports first_port, first_port+1, ... (0: free ports). Errors say
  // what is wrong: no redis-server (with the install hint), a port in use.
  static Result<std::unique_ptr<Sandbox>> start(std::size_t nodes, std::uint16_t first_port,
                                                bool persist, bool fsync_always = true);
  // Starts `nodes` Redis Clusters of `masters` masters with `replicas` replicas each.
  static Result<std::unique_ptr<Sandbox>> start_clusters(std::size_t nodes, std::size_t masters,
                                                         std::size_t replicas);
  // Starts `nodes` masters with `replicas` replicas each, every one watched by three sentinels.
  static Result<std::unique_ptr<Sandbox>> start_sentinels(std::size_t nodes, std::size_t replicas);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Lock nodes (servers, clusters or sentinel-managed masters).
  std::size_t size() const noexcept { return urls().size(); }
  RedisProcess& node(std::size_t i) { return *nodes_[i]; }
  std::vector<std::string> urls() const;
  std::string url_list() const;  // comma-separated, as DLOCK_REDIS takes it

 private:
  explicit Sandbox(std::filesystem::path dir) : dir_(std::move(dir)) {}
  static Result<std::unique_ptr<Sandbox>> make();
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<RedisProcess>> nodes_;
  std::vector<std::unique_ptr<LocalCluster>> clusters_;
  std::vector<std::unique_ptr<LocalSentinel>> sentinels_;
};

}  // namespace dlock::sandbox

// SPDX-License-Identifier: MIT
// ChaosNodes: the lock nodes and the resource node of a chaos run (real redis-server processes
// with an append-only file), and the names each worker knows them by. One server can be
// reached as 127.0.0.1:PORT, localhost:PORT, 127.0.0.2:PORT (the servers also listen on a
// second loopback address) or through a fault-injecting proxy of its own (support/tcp_proxy.h):
// restart protection and duplicate detection must not depend on the spelling.
//
// With --cluster each lock node is a whole Redis Cluster instead (support/sharded_cluster.h: 3
// masters with R replicas each), named by one of its servers (redis-cluster://127.0.0.1:PORT);
// the resource node stays one plain server. The cluster node finds its masters from CLUSTER
// SLOTS, so other spellings and proxies (which would sit only in front of the seed) are not
// offered there.
#pragma once

#include <dlock/result.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "redis_process.h"
#include "support/sharded_cluster.h"
#include "support/tcp_proxy.h"

namespace dlock::chaos {

enum class Spelling { ip, localhost, second_loopback, proxy };
const char* to_string(Spelling s);

// How the workers spell the nodes. same: 127.0.0.1:PORT; mixed: worker w spells node i as the
// ((w + i) mod 3)-th of 127.0.0.1, localhost and 127.0.0.2, so each worker mixes spellings and
// each node is known by several. With proxies, worker w reaches node (w mod nodes) through its
// own proxy instead.
enum class Naming { same, mixed };
std::vector<Spelling> spellings_for(Naming naming, bool proxies, int worker, std::size_t nodes);

class ChaosNodes {
 public:
  // `nodes` lock nodes and one resource node; with second_loopback they also listen on
  // 127.0.0.2.
  static Result<std::unique_ptr<ChaosNodes>> start(std::size_t nodes, bool second_loopback);
  // `clusters` Redis Clusters of kClusterMasters masters with `replicas` replicas each as the
  // lock nodes, and one resource node.
  static Result<std::unique_ptr<ChaosNodes>> start_clusters(std::size_t clusters,
                                                            std::size_t replicas);
  static constexpr std::size_t kClusterMasters = 3;
  ~ChaosNodes();
  ChaosNodes(const ChaosNodes&) = delete;
  ChaosNodes& operator=(const ChaosNodes&) = delete;

  // Lock nodes: servers, or clusters when clustered().
  std::size_t size() const { return clustered() ? clusters_.size() : nodes_.size() - 1; }
  sandbox::RedisProcess& node(std::size_t i) { return *nodes_[i]; }  // Requires: !clustered()
  bool clustered() const { return !clusters_.empty(); }
  test::ShardedCluster& cluster(std::size_t i) { return *clusters_[i]; }
  std::string resource_url() const { return nodes_.back()->url(); }

  // The node URLs worker `worker` uses, comma-separated; node i spelled as spellings[i]. A
  // proxy spelling starts that worker's own proxy in front of node i. Throws
  // std::runtime_error when a proxy cannot listen. Clusters: their URLs, spellings ignored.
  std::string urls_for(int worker, const std::vector<Spelling>& spellings);

  // The proxies in front of node i, by worker.
  std::vector<std::pair<int, test::TcpProxy*>> proxies_of(std::size_t node);
  bool has_proxies() const { return !proxies_.empty(); }
  test::TcpProxy::Stats proxy_totals() const;

 private:
  explicit ChaosNodes(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<sandbox::RedisProcess>> nodes_;    // lock nodes, then the resource
  std::vector<std::unique_ptr<test::ShardedCluster>> clusters_;  // the lock nodes, or none
  std::map<std::pair<std::size_t, int>, std::unique_ptr<test::TcpProxy>> proxies_;
};

}  // namespace dlock::chaos

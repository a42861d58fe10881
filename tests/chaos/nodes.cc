// SPDX-License-Identifier: MIT
#include "nodes.h"

#include <cstdlib>

#include "cluster_faults.h"

namespace dlock::chaos {

const char* to_string(Spelling s) {
  switch (s) {
    case Spelling::ip:
      return "127.0.0.1";
    case Spelling::localhost:
      return "localhost";
    case Spelling::second_loopback:
      return "127.0.0.2";
    case Spelling::proxy:
      return "proxy";
  }
  return "?";
}

std::vector<Spelling> spellings_for(Naming naming, bool proxies, int worker, std::size_t nodes) {
  const std::vector<Spelling> direct =
      naming == Naming::mixed
          ? std::vector<Spelling>{Spelling::ip, Spelling::localhost, Spelling::second_loopback}
          : std::vector<Spelling>{Spelling::ip};
  const auto w = static_cast<std::size_t>(worker);
  std::vector<Spelling> out;
  for (std::size_t i = 0; i < nodes; ++i) {
    // One node per worker through a proxy: every worker pays the proxy's hop on one path, so
    // none loses every race for the lock to the others, and the proxies' own load on the
    // machine stays a fifth of the traffic.
    out.push_back(proxies && i == w % nodes ? Spelling::proxy : direct[(w + i) % direct.size()]);
  }
  return out;
}

Result<std::unique_ptr<ChaosNodes>> ChaosNodes::start(std::size_t nodes, bool second_loopback) {
  char tmpl[] = "/tmp/dlock-chaos-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Error(errc::io_error, "cannot create a temporary folder");
  std::unique_ptr<ChaosNodes> set(new ChaosNodes(tmpl));
  for (std::size_t i = 0; i <= nodes; ++i) {
    const auto dir = set->dir_ / ("node-" + std::to_string(i + 1));
    std::filesystem::create_directories(dir);
    // AOF with fsync every second: a node restarted from it may miss its last second of
    // writes, as in production; it is kept out of quorums like any restarted node.
    sandbox::RedisProcessOptions options;
    options.persist = true;
    options.fsync_always = false;
    // A later --bind replaces the first: the server listens on both loopback addresses.
    if (second_loopback) options.extra_args = {"--bind", "127.0.0.1", "127.0.0.2"};
    auto node = std::make_unique<sandbox::RedisProcess>(dir, options);
    if (auto started = node->start(); !started) return std::move(started).error();
    set->nodes_.push_back(std::move(node));
  }
  return set;
}

Result<std::unique_ptr<ChaosNodes>> ChaosNodes::start_clusters(std::size_t clusters,
                                                               std::size_t replicas) {
  auto set = start(0, /*second_loopback=*/false);  // the resource node alone
  if (!set) return set;
  // One after the other, on this thread: a server gets SIGKILL when the thread that started it
  // ends (PR_SET_PDEATHSIG, redis_process.cc), so a helper thread cannot start them.
  for (std::size_t i = 0; i < clusters; ++i) {
    try {
      auto cluster = std::make_unique<test::ShardedCluster>(kClusterMasters, replicas);
      for (std::size_t k = 0; k < cluster->size(); ++k) sync_replicas_at_once(*cluster, k);
      (*set)->clusters_.push_back(std::move(cluster));
    } catch (const std::exception& e) {
      return Error(errc::io_error, "cluster " + std::to_string(i + 1) + ": " + e.what());
    }
  }
  return set;
}

ChaosNodes::~ChaosNodes() {
  proxies_.clear();
  clusters_.clear();
  nodes_.clear();  // kills every server, by pid
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string ChaosNodes::urls_for(int worker, const std::vector<Spelling>& spellings) {
  std::string out;
  for (const auto& c : clusters_) out += (out.empty() ? "" : ",") + c->url();
  if (clustered()) return out;
  for (std::size_t i = 0; i < size(); ++i) {
    std::string host = to_string(spellings[i]);
    std::uint16_t port = nodes_[i]->port();
    if (spellings[i] == Spelling::proxy) {
      auto& proxy = proxies_[{i, worker}];
      if (!proxy) proxy = std::make_unique<test::TcpProxy>("127.0.0.1", port);
      host = proxy->host();
      port = proxy->port();
    }
    out += (i ? "," : "") + std::string("redis://") + host + ":" + std::to_string(port);
  }
  return out;
}

std::vector<std::pair<int, test::TcpProxy*>> ChaosNodes::proxies_of(std::size_t node) {
  std::vector<std::pair<int, test::TcpProxy*>> out;
  for (auto& [key, proxy] : proxies_) {
    if (key.first == node) out.emplace_back(key.second, proxy.get());
  }
  return out;
}

test::TcpProxy::Stats ChaosNodes::proxy_totals() const {
  test::TcpProxy::Stats sum;
  for (const auto& [key, proxy] : proxies_) {
    const auto s = proxy->stats();
    sum.connections += s.connections;
    sum.requests += s.requests;
    sum.replies += s.replies;
    sum.dropped_requests += s.dropped_requests;
    sum.dropped_replies += s.dropped_replies;
    sum.lost_targeted += s.lost_targeted;
    sum.cut += s.cut;
  }
  return sum;
}

}  // namespace dlock::chaos

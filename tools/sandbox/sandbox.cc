// SPDX-License-Identifier: MIT
#include "sandbox.h"

#include <cstdlib>

namespace dlock::sandbox {

Result<std::unique_ptr<Sandbox>> Sandbox::start(std::size_t nodes, std::uint16_t first_port,
                                                bool persist, bool fsync_always) {
  if (nodes == 0 || nodes > 99) {
    return Error(errc::invalid_argument, "--nodes must be between 1 and 99");
  }
  if (first_port != 0 && first_port + nodes - 1 > 65535) {
    return Error(errc::invalid_argument,
                 "--port leaves no room for " + std::to_string(nodes) + " nodes below 65536");
  }
  auto made = make();
  if (!made) return made;
  auto sandbox = std::move(*made);
  for (std::size_t i = 0; i < nodes; ++i) {
    const auto dir = sandbox->dir_ / ("node-" + std::to_string(i + 1));
    std::filesystem::create_directories(dir);
    RedisProcessOptions options;
    options.persist = persist;
    options.fsync_always = fsync_always;
    options.port = first_port == 0 ? 0 : static_cast<std::uint16_t>(first_port + i);
    auto node = std::make_unique<RedisProcess>(dir, options);
    if (auto started = node->start(); !started) return std::move(started).error();
    sandbox->nodes_.push_back(std::move(node));
  }
  return sandbox;
}

Result<std::unique_ptr<Sandbox>> Sandbox::make() {
  char tmpl[] = "/tmp/dlock-sandbox-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Error(errc::io_error, "cannot create a temporary folder");
  return std::unique_ptr<Sandbox>(new Sandbox(tmpl));
}

Result<std::unique_ptr<Sandbox>> Sandbox::start_clusters(std::size_t nodes, std::size_t masters,
                                                         std::size_t replicas) {
  if (nodes == 0 || nodes > 9) return Error(errc::invalid_argument, "1 to 9 clusters");
  auto made = make();
  if (!made) return made;
  auto sandbox = std::move(*made);
  for (std::size_t i = 0; i < nodes; ++i) {
    const auto dir = sandbox->dir_ / ("cluster-" + std::to_string(i + 1));
    std::filesystem::create_directories(dir);
    LocalClusterOptions options;
    options.masters = masters;
    options.replicas = replicas;
    auto cluster = LocalCluster::start(dir, options);
    if (!cluster) return std::move(cluster).error();
    sandbox->clusters_.push_back(std::move(*cluster));
  }
  return sandbox;
}

Result<std::unique_ptr<Sandbox>> Sandbox::start_sentinels(std::size_t nodes, std::size_t replicas) {
  if (nodes == 0 || nodes > 9) return Error(errc::invalid_argument, "1 to 9 sentinel sets");
  auto made = make();
  if (!made) return made;
  auto sandbox = std::move(*made);
  for (std::size_t i = 0; i < nodes; ++i) {
    const auto dir = sandbox->dir_ / ("sentinel-set-" + std::to_string(i + 1));
    std::filesystem::create_directories(dir);
    LocalSentinelOptions options;
    options.replicas = replicas;
    options.master_name = "dlock-" + std::to_string(i + 1);
    auto set = LocalSentinel::start(dir, options);
    if (!set) return std::move(set).error();
    sandbox->sentinels_.push_back(std::move(*set));
  }
  return sandbox;
}

Sandbox::~Sandbox() {
  sentinels_.clear();
  clusters_.clear();
  nodes_.clear();  // kills every server, by pid
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::vector<std::string> Sandbox::urls() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back(n->url());
  for (const auto& c : clusters_) out.push_back(c->url());
  for (const auto& s : sentinels_) out.push_back(s->url());
  return out;
}

std::string Sandbox::url_list() const {
  std::string out;
  for (const auto& url : urls()) out += (out.empty() ? "" : ",") + url;
  return out;
}

}  // namespace dlock::sandbox

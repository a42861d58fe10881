// SPDX-License-Identifier: MIT
// ClusterPair: the cluster section's two clusters, of 1 and of 3 masters (MeasuredCluster),
// started on a thread of their own that lives as long as they do. A server dies with the thread
// that started it (RedisProcess sets PR_SET_PDEATHSIG), and forming a cluster is 2-3 s of
// Redis' own waiting, which the caller may spend on other work meanwhile (the smoke run does).
#pragma once

#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "measured_cluster.h"

namespace dlock::bench {

class ClusterPair {
 public:
  // Starts forming both in `dir`; `on_thread` runs first on the starting thread (to pin it:
  // the servers inherit its CPUs).
  ClusterPair(std::filesystem::path dir, std::function<void()> on_thread);
  ~ClusterPair();  // stops every server
  ClusterPair(const ClusterPair&) = delete;
  ClusterPair& operator=(const ClusterPair&) = delete;

  // Wait until both are ready; throw what starting them threw.
  const MeasuredCluster& one();
  const MeasuredCluster& three();

 private:
  std::unique_ptr<MeasuredCluster> one_;
  std::unique_ptr<MeasuredCluster> three_;
  std::promise<void> stop_;
  std::shared_future<void> ready_;
  std::thread thread_;  // last: it starts once every member above exists
};

}  // namespace dlock::bench

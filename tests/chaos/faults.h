// SPDX-License-Identifier: MIT
// The chaos runner's fault schedule: one fault at a time, drawn from a seeded generator.
//
// Process faults (always): restart-empty, restart-aof, kill, stop-node (a node), pause-holder
// (a worker stopped between its read and its write). Reply faults (with proxies in front of the
// nodes, ChaosNodes): for one node, on the proxies of every worker that reaches it through
// one, drop-replies (commands run, the replies vanish), delay-replies, blackhole (nothing
// passes), cut (connections closed); and, for one worker on one node, lose-release-reply and
// lose-acquire-reply (that call runs on the node, its reply never reaches the worker, and now
// and then the connection is cut right after). Cluster faults (the nodes are Redis Clusters,
// instead of the process and reply faults): failover, failover-lossy, freeze-master, reshard,
// stop-master (cluster_faults.h), and pause-holder.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cluster_faults.h"
#include "history.h"
#include "nodes.h"

namespace dlock::chaos {

struct FaultTargets {
  ChaosNodes* nodes = nullptr;
  std::vector<pid_t> workers;
  std::vector<bool> nesting;  // per worker: a nesting worker (preferred target of lost replies)
  std::vector<bool> permit_holders;  // per worker: takes permits (its calls name the semaphore)
  std::vector<bool> async;           // per worker: an async worker (names under kAsyncPrefix)
  // The node the async workers use as a lock set of one node (RunOptions), if any: never
  // restarted empty (faults.cc, node_fault).
  std::optional<std::size_t> solo_node;
  int skewed = 0;  // workers [0, skewed) are never paused
  std::chrono::milliseconds ttl{500};
  std::chrono::milliseconds max_ttl{500};  // the largest ttl any worker uses
  std::chrono::milliseconds wait{10000};
};

class FaultSchedule {
 public:
  // With reply_faults the schedule also draws the proxy faults; without, it is the schedule
  // of earlier versions of the runner, draw for draw.
  FaultSchedule(FaultTargets targets, unsigned seed, bool reply_faults);

  // How long to wait before the next fault (0.3-1 s).
  std::chrono::milliseconds pause();
  // Injects the next fault and returns its record, or nullopt when it did not take effect (a
  // holder that never stopped, a call that never came).
  std::optional<Fault> inject();
  // Faults injected by kind, with "<kind> (missed)" for those that did not take effect.
  const std::map<std::string, std::size_t>& counts() const { return counts_; }
  // What the old masters replied during reshards (cluster faults only).
  const Redirects& redirects() const { return redirects_; }

 private:
  std::optional<Fault> standalone_fault();
  std::optional<Fault> cluster_fault();
  std::optional<Fault> node_fault(unsigned kind, std::size_t node);
  std::optional<Fault> pause_holder();
  std::optional<Fault> proxy_window(unsigned kind, std::size_t node);
  std::optional<Fault> lose_reply(unsigned kind, std::size_t node);
  // A node that some worker reaches through a proxy, starting at `node`; nullopt if none.
  std::optional<std::size_t> proxied_node(std::size_t node);
  std::chrono::milliseconds between(int from_ms, int to_ms);

  FaultTargets t_;
  std::mt19937 rng_;
  bool reply_faults_;
  std::size_t next_worker_ = 1;  // the holder to pause next (worker 0 may be skewed)
  std::map<std::string, std::size_t> counts_;
  Redirects redirects_;
};

}  // namespace dlock::chaos

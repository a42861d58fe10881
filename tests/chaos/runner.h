// SPDX-License-Identifier: MIT
// The chaos runner's controller: starts the nodes and the worker processes, injects faults on a
// seeded schedule, records the history, and stops everything.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "nodes.h"

namespace dlock::chaos {

struct RunOptions {
  std::size_t nodes = 5;
  int workers = 6;
  std::chrono::milliseconds duration{60000};
  std::chrono::milliseconds ttl{500};
  std::chrono::milliseconds wait{10000};
  std::string history = "chaos-history.jsonl";
  unsigned seed = 1;
  int skewed = 1;
  double skew_rate = 0.5;
  int nesting = 0;         // workers that nest reentrant leases (after the skewed ones)
  int readers = 0;         // workers that take the read lock (after the nesting ones)
  int permit_holders = 0;  // workers that take a permit of a semaphore (after the readers)
  unsigned permits = 2;    // that semaphore's permits
  // Async workers (async_worker.cc), beside `workers`: each runs `inflight` critical sections
  // at once through the asio API, half on a lock set of one node (ChaosNodes' solo node).
  int async_workers = 0;
  unsigned inflight = 16;
  bool reply_faults = false;  // proxies in front of the nodes, and the faults they inject
  Naming naming = Naming::same;
  // Each of the `nodes` lock nodes is a Redis Cluster of 3 masters with this many replicas
  // each; the faults are then the cluster faults (faults.h).
  bool cluster = false;
  std::size_t cluster_replicas = 1;
  // Workers with an odd index run this binary instead of this one: an older dlock_chaos (its
  // libdlock.so beside it), so that two protocol versions share the lock set and the checker
  // judges them together. Empty: every worker runs this binary.
  std::string mixed_binary;
};

// The lock node the async workers' one-node lock set is (index): the node the first async
// worker reaches through its own proxy with --reply-faults (nodes.h), so that the reply faults
// reach the solo set's batch calls; the other async workers spell it another way.
std::size_t solo_node(const RunOptions& o);

// run_chaos's status when the history is written but the resource did not answer the final
// read of a counter: the checker still runs (on everything but that counter), and the run fails.
inline constexpr int kResourceUnread = 70;

// Runs the workers under faults for o.duration and writes the history. 0 on success, else an
// exit status (69: the nodes could not start, 64: the history cannot be written,
// kResourceUnread).
int run_chaos(const RunOptions& o);

}  // namespace dlock::chaos

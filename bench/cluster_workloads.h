// SPDX-License-Identifier: MIT
// The benchmark's cluster section: one dlock client on a Redis Cluster (one redis-cluster:// URL,
// each lock on the master of its name's slot). How the load divides over the masters and what a
// lock costs each of them, and what a stale slot map (a MOVED redirect) adds to a cycle.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "measured_cluster.h"
#include "stats.h"

namespace dlock::bench {

// Many locks in flight (dlock's asio API, async_throughput) on a cluster: medians over rounds.
struct ClusterLoad {
  double locks_per_second = 0;
  double cpu_ms_per_1000 = 0;   // all masters' Redis CPU (ms) per 1,000 locks
  double scripts_per_lock = 0;  // the masters' script calls per cycle the client counted (2)
  // Per master: its CPU (ms) per 1,000 locks it served (its script calls / 2), its share of all
  // masters' CPU, and its share of the locks.
  std::vector<double> master_cpu_ms_per_1000;
  std::vector<double> master_cpu_share;
  std::vector<double> master_lock_share;
  std::vector<int> master_names;  // how many of the names hash to each master's slots
};

// Acquire+release of one name, timed cycle by cycle: with a fresh slot map, and right after the
// name's slot moved to another master (stale: the acquire meets MOVED, and the cluster sits out
// the largest live ttl). A cycle is try_lock, again after retry_delay until granted, then unlock.
struct RedirectCost {
  Summary fresh;
  Summary stale;
  Summary stale_refused;               // the part of a stale cycle spent in refused try_locks
  double moved_replies_per_cycle = 0;  // MOVED replies the masters sent per stale cycle
  int fresh_attempts = 0;              // try_lock calls in all fresh cycles
  int stale_attempts = 0;              // and in all stale ones
  std::string refusal;                 // why a try_lock was refused, if one was
  int moves = 0;
  int fresh_per_move = 0;
  double rest_ms = 0;  // the client left alone after each moved cycle
};

struct ClusterResults {
  std::map<std::size_t, std::map<int, ClusterLoad>> load;  // [masters][in flight]
  // Redis CPU (ms per second) of an idle master, the mean of its cluster's: cron and the
  // cluster bus, part of every load row's CPU. [masters]
  std::map<std::size_t, double> idle_cpu_ms_per_s;
  std::map<std::size_t, std::vector<int>> slots;  // [masters]: how many slots each serves
  RedirectCost redirect;
  int rounds = 0;
  double run_ms = 0;  // per round and point
};

// Runs the section on a 1-master and a 3-master cluster: `rounds` interleaved rounds of every
// (masters, in flight) point, then the redirect cost on `three`. `say` reports progress.
ClusterResults measure_clusters(const MeasuredCluster& one, const MeasuredCluster& three,
                                bool smoke, const std::function<void(const std::string&)>& say);

}  // namespace dlock::bench

// SPDX-License-Identifier: MIT
// The benchmark's output: docs/performance.md (tables with dlock's ratio to each peer and the
// targets met or missed), performance.csv (every number) and performance.png (gnuplot).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "cluster_workloads.h"
#include "contention.h"
#include "service_results.h"
#include "stats.h"
#include "workloads.h"

namespace dlock::bench {

// Row labels, shared by main.cc and the report.
inline const std::string kRaw = "raw floor";
inline const std::string kRawAll = "raw, acquire waits for all";
inline const std::string kNaive = "naive (seed 000)";
inline const std::string kRedisPy = "redis-py Lock";
inline const std::string kRedlock = "node-redlock";
inline const std::string kDlock = "dlock";
inline const std::string kDlockFair = "dlock fair";
inline const std::string kDlockAsync = "dlock async";
inline const std::string kRawNew = "raw floor, new name per cycle";
inline const std::string kDlockNew = "dlock, new name per cycle";
// The observer section: dlock without an observer, with one that does nothing, with Prometheus.
inline const std::string kObserverUnset = "dlock, observer unset";
inline const std::string kObserverNoop = "dlock, no-op observer";
inline const std::string kObserverPrometheus = "dlock, PrometheusObserver";
inline const std::string kMixedMutex = "dlock Mutex, every section exclusive";
inline const std::string kMixedShared = "dlock SharedMutex, reads shared";
inline const std::string kMixedSemaphore = "dlock Semaphore, 4 permits (every section)";

struct Results {
  std::map<std::string, std::map<int, Summary>> latency;    // [impl][nodes]
  std::map<std::string, std::map<int, double>> throughput;  // [impl][in flight] cycles/s
  std::map<std::string, ContentionStats> contention;        // [impl]
  // Many in flight from one thread (dlock's asio API), on 1 and 5 nodes: cycles/s and the
  // redis-servers' CPU per cycle (µs, all nodes together). [impl][nodes][in flight]
  std::map<std::string, std::map<int, std::map<int, double>>> in_flight;
  std::map<std::string, std::map<int, std::map<int, double>>> server_us;
  int contention_workers = 0;
  int contention_count = 0;
  int hold_us = 0;
  int retry_ms = 0;
  WatchdogCost watchdog;
  int watchdog_locks = 0;
  int watchdog_ttl_ms = 0;
  std::map<std::string, double> memory_per_lock;         // [impl] bytes
  std::map<std::string, NameFootprint> memory_per_name;  // [impl] once no longer locked
  int memory_names = 0;
  std::map<std::string, double> instructions;  // [impl] per cycle (callgrind)
  // Shared and counted locks: critical sections per second on one name. [impl][nodes]
  std::map<std::string, std::map<int, double>> mixed;
  int mixed_threads = 0;
  int mixed_hold_us = 0;
  double mixed_read_share = 0;
  // Redis Cluster as a lock node (cluster_workloads.h); empty when the section did not run.
  std::optional<ClusterResults> cluster;
  // Through `dlock serve` (service_workloads.h); empty when the section did not run.
  std::optional<ServiceResults> service;
  std::string placement;  // where the client and the servers ran
  std::string versions;   // of every part measured
  std::string command;    // what produced the report
  bool smoke = false;
};

// Writes performance.md, performance.csv and performance.png (when gnuplot is installed) into
// `dir`; the hand-written explanations in `notes` are appended to the markdown.
void write_report(const Results& results, const std::filesystem::path& dir,
                  const std::string& notes);

}  // namespace dlock::bench

// SPDX-License-Identifier: MIT
// dlock_chaos: Jepsen-style runner. M worker processes run critical sections on a fenced
// counter under one lock, against N real redis-server processes, while the controller injects
// faults on a seeded schedule; every critical section is appended to a history file, which the
// checker (history.h) then judges.
//
//   dlock_chaos --duration 60s --history /tmp/h.jsonl      # run, then check
//   dlock_chaos --check /tmp/h.jsonl                        # check a history only
//   dlock_chaos --nesting 1 --reply-faults --naming mixed   # the faults below, all of them
//
// Faults: kill -9 of a node, restarted empty or from its append-only file; SIGSTOP/SIGCONT of
// a node; SIGSTOP of a holder between its read and its write, past its ttl; a worker whose
// clock runs at another rate (libfaketime), holding on an explicit lease. With --nesting,
// workers that nest reentrant leases with other ttls (nesting_worker.cc); with --readers,
// workers that take the read lock (they may overlap each other, never a writer); with
// --permit-holders, workers that take one of --permits permits of a semaphore (at most that
// many at once); with --reply-faults, a proxy in front of each node for each worker that reaches it
// through one, which drops, delays or blackholes one node's replies, cuts connections, or loses the
// reply of one release or acquisition (faults.h); with --naming mixed, workers spell the nodes
// differently (nodes.h); with --mixed-binary, every other worker runs an older dlock_chaos, so
// that two protocol versions share the lock set (an upgrade in progress); with --async-workers,
// worker processes that each run --inflight critical sections at once through the asio API, half on
// a lock set of one node, so that group commit batches their calls (async_worker.cc). One fault is
// injected at a time, but a restarted node then sits out of quorums for one max ttl, which can
// overlap the next fault: for short stretches two nodes, now and then three, cannot vote, and the
// lock is unavailable until one returns (safe, not live; the checker allows it inside fault
// windows).
//
// With --cluster each lock node is a Redis Cluster (3 masters, --cluster-replicas replicas each;
// 3 clusters as 3 Redlock nodes unless --nodes says otherwise) and the faults are the cluster
// ones (cluster_faults.h): failover (a master killed, its replica promoted, the killed server
// back as a replica), failover-lossy (the replica cut off first, so recent writes are lost),
// freeze-master (a master stopped until its replica took over, then resumed), reshard (the
// lock's slot moved to another master step by step: ASK, TRYAGAIN, then MOVED), stop-master
// (shorter than the node timeout), and pause-holder as above. A failover changes the
// cluster's boot identity, so that cluster sits out of quorums for one max ttl. The skewed,
// nesting, reader and permit workers work as above; server restarts, stop-node,
// --reply-faults and --naming mixed do not apply.
//
//   dlock_chaos --cluster --cluster-replicas 1 --duration 3m --history /tmp/c.jsonl
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "duration.h"
#include "history.h"
#include "runner.h"
#include "starvation_watch.h"
#include "worker.h"

namespace dlock::chaos {
namespace {

int print_check(const std::string& path) {
  History h;
  try {
    h = read_history(path);
  } catch (const std::exception& e) {
    std::cerr << "dlock_chaos: " << e.what() << "\n";
    return 64;
  }
  const Report r = check(h);
  std::cout << "history " << path << ": " << r.cycles << " cycles, " << r.accepted
            << " accepted writes, " << r.refused << " refused, " << r.timeouts << " timeouts, "
            << r.held_only << " held without a write, "
            << std::count_if(h.faults.begin(), h.faults.end(),
                             [](const Fault& f) { return f.kind != kStarved; })
            << " faults\n"
            << "workers starved of CPU (a thread waited half of "
            << StarvationWatch::kWindow.count() << " ms or more for it): "
            << std::count_if(h.faults.begin(), h.faults.end(),
                             [](const Fault& f) { return f.kind == kStarved; })
            << " periods; waits that failed then (excused): " << r.starved_timeouts << "\n"
            << "late writes of paused or skewed holders: " << r.expected_overlaps
            << ", refused by fencing: " << r.caught_by_fencing
            << ", accepted before the next holder touched the resource (harmless): "
            << r.harmless_late_writes << "\n"
            << "violations: " << r.violations.size() << " (overlaps: inside "
            << r.overlapped_windows << " holders' windows)\n";
  for (const auto& x : r.excused) std::cout << "  EXCUSED " << x << "\n";
  for (const auto& v : r.violations) std::cout << "  VIOLATION " << v << "\n";
  return r.violations.empty() ? 0 : 1;
}

}  // namespace
}  // namespace dlock::chaos

int main(int argc, char** argv) {
  using namespace dlock::chaos;
  CLI::App app{"dlock_chaos: faults, a recorded history, and a checker"};
  RunOptions run;
  WorkerOptions worker;
  std::string check_only;
  std::string duration = "60s";
  std::string ttl = "500ms";
  std::string wait = "10s";
  std::string naming = "same";
  int worker_id = 0;
  auto* nodes = app.add_option("--nodes", run.nodes, "lock nodes (default 5; with --cluster 3)");
  app.add_option("--workers", run.workers, "worker processes (default 6)");
  app.add_option("--duration", duration, "how long to inject faults (default 60s)");
  app.add_option("--ttl", ttl, "lock ttl (default 500ms)");
  app.add_option("--wait", wait, "a worker's wait bound (default 10s)");
  app.add_option("--history", run.history, "history file (JSON lines)");
  app.add_option("--seed", run.seed, "fault schedule seed");
  app.add_option("--skewed", run.skewed, "workers with a slow clock (libfaketime; default 1)");
  app.add_option("--skew-rate", run.skew_rate, "their clock rate (default 0.5)");
  app.add_option("--nesting", run.nesting,
                 "workers that nest reentrant leases with other ttls (default 0)");
  app.add_option("--readers", run.readers,
                 "workers that take the read lock (SharedMutex's reader side) beside the writers; "
                 "the checker allows readers to overlap only each other (default 0)");
  app.add_option("--permit-holders", run.permit_holders,
                 "workers that take one permit of a semaphore at a time; the checker allows at "
                 "most --permits of them at once, and one per permit (default 0)");
  app.add_option("--permits", run.permits, "that semaphore's permits (default 2)")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--async-workers", run.async_workers,
                 "worker processes (beside --workers) that each run --inflight critical sections "
                 "at once through the asio API, half on a lock set of one node: group commit "
                 "batches their acquisitions and releases (default 0)");
  app.add_option("--inflight", run.inflight,
                 "critical sections in flight per async worker (default 16)")
      ->check(CLI::Range(2u, 256u));
  app.add_flag("--reply-faults", run.reply_faults,
               "proxies in front of the nodes: lost, delayed and blackholed replies, cuts");
  app.add_option("--naming", naming,
                 "same: 127.0.0.1 for all; mixed: workers spell nodes "
                 "as 127.0.0.1, localhost, 127.0.0.2 or a proxy")
      ->check(CLI::IsMember({"same", "mixed"}));
  app.add_flag("--cluster", run.cluster,
               "each lock node a Redis Cluster of 3 masters; faults: failover (kill -9 a master, "
               "its replica takes over, it rejoins as a replica), failover-lossy (the replica "
               "cut off first), freeze-master (SIGSTOP until replaced, then SIGCONT), reshard "
               "(the lock's slot moves: ASK, TRYAGAIN, then MOVED), stop-master (below the node "
               "timeout), pause-holder; off: server restarts, stop-node, --reply-faults, "
               "--naming mixed");
  app.add_option("--cluster-replicas", run.cluster_replicas,
                 "with --cluster: replicas per master (default 1; 0: no failovers)")
      ->check(CLI::Range(0u, 5u));
  app.add_option("--mixed-binary", run.mixed_binary,
                 "workers with an odd index run this dlock_chaos instead (an older version, its "
                 "libdlock.so in the same folder): two protocol versions share the lock set")
      ->check(CLI::ExistingFile);
  app.add_option("--check", check_only, "only check this history file");
  app.add_option("--worker", worker_id)->group("");
  app.add_option("--worker-nodes", worker.nodes)->group("");
  app.add_option("--resource", worker.resource)->group("");
  app.add_flag("--skewed-worker", worker.skewed)->group("");
  app.add_flag("--nesting-worker", worker.nesting)->group("");
  app.add_flag("--reader-worker", worker.reader)->group("");
  app.add_option("--permit-worker", worker.permits)->group("");
  app.add_option("--worker-seed", worker.seed)->group("");
  app.add_option("--async-worker", worker.inflight)->group("");
  app.add_option("--solo-node", worker.solo_node)->group("");
  CLI11_PARSE(app, argc, argv);
  if (!check_only.empty()) return print_check(check_only);
  auto d = dlock::cli::parse_duration(duration);
  auto t = dlock::cli::parse_duration(ttl);
  auto w = dlock::cli::parse_duration(wait);
  if (!d || !t || !w) {
    std::cerr << "dlock_chaos: bad duration\n";
    return 64;
  }
  if (worker_id > 0) {
    worker.id = worker_id;
    worker.ttl = *t;
    worker.wait = *w;
    return run_worker(worker);
  }
  run.duration = *d;
  run.ttl = *t;
  run.wait = *w;
  run.naming = naming == "mixed" ? Naming::mixed : Naming::same;
  if (run.cluster) {
    if (nodes->count() == 0) run.nodes = 3;
    if (run.reply_faults || run.naming != Naming::same) {
      std::cerr << "dlock_chaos: --cluster takes neither --reply-faults nor --naming mixed\n";
      return 64;
    }
  }
  if (run.nodes == 0) {
    std::cerr << "dlock_chaos: --nodes must be at least 1\n";
    return 64;
  }
  if (run.cluster && run.async_workers > 0) {
    // A cluster node never batches (node/call.h): there is no group commit to exercise.
    std::cerr << "dlock_chaos: --cluster takes no --async-workers\n";
    return 64;
  }
  if (run.skewed + run.nesting + run.readers + run.permit_holders > run.workers) {
    std::cerr << "dlock_chaos: --skewed, --nesting, --readers and --permit-holders exceed "
                 "--workers\n";
    return 64;
  }
  const int rc = run_chaos(run);
  if (rc != 0 && rc != kResourceUnread) return rc;
  const int checked = print_check(run.history);
  return checked != 0 ? checked : rc;
}

// SPDX-License-Identifier: MIT
#include "cluster_report.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace dlock::bench {
namespace {

std::string fixed(double v, int digits) {
  if (std::isnan(v) || std::isinf(v)) return "–";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string thousands(double v) {
  if (std::isnan(v)) return "–";
  std::string s = std::to_string(static_cast<long long>(std::llround(v)));
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

std::string ratio(double v) {
  return std::isnan(v) || std::isinf(v) ? "–" : fixed(v, 2) + "×";
}

std::string percent(double share) {
  return fixed(100 * share, 0) + "%";
}

const ClusterLoad* load_of(const ClusterResults& r, std::size_t masters, int k) {
  const auto by = r.load.find(masters);
  if (by == r.load.end()) return nullptr;
  const auto l = by->second.find(k);
  return l == by->second.end() ? nullptr : &l->second;
}

double idle_of(const ClusterResults& r, std::size_t masters) {
  const auto it = r.idle_cpu_ms_per_s.find(masters);
  return it == r.idle_cpu_ms_per_s.end() ? NAN : it->second;
}

// "5461, 5462 and 5461": the slots of the 3-master cluster's masters.
std::string slots_of(const ClusterResults& r) {
  const auto it = r.slots.find(3);
  if (it == r.slots.end() || it->second.size() != 3) return "–";
  const auto& n = it->second;
  return std::to_string(n[0]) + ", " + std::to_string(n[1]) + " and " + std::to_string(n[2]);
}

// "27, 19 and 18 fall on masters 1, 2 and 3" for the 3-master cluster at `k` in flight.
std::string names_per_master(const ClusterResults& r, int k) {
  const auto* l = load_of(r, 3, k);
  if (!l || l->master_names.size() != 3) return "–";
  const auto& n = l->master_names;
  return std::to_string(n[0]) + ", " + std::to_string(n[1]) + " and " + std::to_string(n[2]) +
         " fall on masters 1, 2 and 3";
}

void load_table(const ClusterResults& r, std::ostream& md) {
  md << "| cluster | in flight | locks/s | Redis CPU per 1,000 locks, all masters | master 1: CPU "
        "per 1,000 of its locks (share of CPU, of locks) | master 2 | master 3 |\n"
     << "|---|---|---|---|---|---|---|\n";
  for (const auto& [masters, by] : r.load) {
    for (const auto& [k, l] : by) {
      md << "| " << masters << (masters == 1 ? " master" : " masters") << " | " << k << " | "
         << thousands(l.locks_per_second) << " | " << fixed(l.cpu_ms_per_1000, 1) << " ms";
      for (std::size_t m = 0; m < 3; ++m) {
        if (m >= l.master_cpu_share.size()) {
          md << " | –";
          continue;
        }
        md << " | " << fixed(l.master_cpu_ms_per_1000[m], 1) << " ms ("
           << percent(l.master_cpu_share[m]) << ", " << percent(l.master_lock_share[m]) << ")";
      }
      md << " |\n";
    }
  }
  for (int k : {64, 256}) {
    const auto* one = load_of(r, 1, k);
    const auto* three = load_of(r, 3, k);
    if (!one || !three) continue;
    md << "| 3 masters ÷ 1 master | " << k << " | "
       << ratio(three->locks_per_second / one->locks_per_second) << " | "
       << ratio(three->cpu_ms_per_1000 / one->cpu_ms_per_1000);
    for (double v : three->master_cpu_ms_per_1000) md << " | " << ratio(v / one->cpu_ms_per_1000);
    md << " |\n";
  }
}

void redirect_table(const ClusterResults& r, std::ostream& md) {
  const RedirectCost& c = r.redirect;
  const auto per = [](int attempts, std::size_t cycles) {
    return cycles > 0 ? fixed(static_cast<double>(attempts) / static_cast<double>(cycles), 2)
                      : std::string("–");
  };
  md << "| cycle | cycles | p50 | p99 | try_lock calls per cycle | MOVED replies per cycle |\n"
     << "|---|---|---|---|---|---|\n"
     << "| fresh slot map | " << c.fresh.n << " | " << fixed(c.fresh.p50, 1) << " | "
     << fixed(c.fresh.p99, 1) << " | " << per(c.fresh_attempts, c.fresh.n) << " | 0 |\n"
     << "| the slot moved just before (stale map) | " << c.stale.n << " | " << fixed(c.stale.p50, 1)
     << " | " << fixed(c.stale.p99, 1) << " | " << per(c.stale_attempts, c.stale.n) << " | "
     << fixed(c.moved_replies_per_cycle, 2) << " |\n"
     << "| of which refused try_locks | | " << fixed(c.stale_refused.p50, 1) << " | "
     << fixed(c.stale_refused.p99, 1) << " | | |\n"
     << "| stale ÷ fresh | | " << ratio(c.stale.p50 / c.fresh.p50) << " | "
     << ratio(c.stale.p99 / c.fresh.p99) << " | | |\n";
}

}  // namespace

double cluster_share_spread(const ClusterResults& r) {
  const auto* l = load_of(r, 3, 256);
  if (!l || l->master_cpu_share.empty()) return NAN;
  const auto [lo, hi] = std::minmax_element(l->master_cpu_share.begin(), l->master_cpu_share.end());
  return *hi / *lo;
}

double cluster_cpu_per_lock_ratio(const ClusterResults& r) {
  const auto* one = load_of(r, 1, 256);
  const auto* three = load_of(r, 3, 256);
  if (!one || !three || three->master_cpu_ms_per_1000.empty()) return NAN;
  const double worst =
      *std::max_element(three->master_cpu_ms_per_1000.begin(), three->master_cpu_ms_per_1000.end());
  return worst / one->cpu_ms_per_1000;
}

void write_cluster_markdown(const ClusterResults& r, const std::string& placement,
                            std::ostream& md) {
  md << "\n## Redis Cluster\n\n"
     << "One client and one `redis-cluster://` URL: the whole cluster is one lock node, and each "
        "lock goes to the master of its name's hash slot. Acquire+release cycles with 64 and 256 "
        "in flight on distinct names (so they spread over the slots), from dlock's asio API as "
        "in *Many in flight*; "
     << r.rounds << (r.rounds == 1 ? " round" : " rounds") << " of " << fixed(r.run_ms / 1000, 1)
     << " s on each cluster, interleaved, and the median of each cell over the rounds. Redis CPU "
        "is each master's `INFO` used_cpu_user + used_cpu_sys read before and after a run; a "
        "master's locks are the scripts it ran (EVALSHA + EVAL) ÷ 2, as the server counts them. "
        "The 1-master cluster is one redis-server started with `--cluster-enabled yes` that "
        "serves all 16384 slots itself (`CLUSTER ADDSLOTSRANGE 0 16383`; `redis-cli --cluster "
        "create` wants 3 masters), so the client routes by slot there too; the 3-master cluster "
        "is made by `redis-cli --cluster create` ("
     << slots_of(r) << " slots). No replicas.\n\n";
  load_table(r, md);
  md << "\nIdle, a master used " << fixed(idle_of(r, 1), 1) << " ms (1-master cluster) and "
     << fixed(idle_of(r, 3), 1)
     << " ms (3-master cluster) of CPU per second (cron and the cluster bus); that is in every "
        "CPU figure above.\n"
     << "\nWhat this shows: what a lock costs a master, and how the work divides. The ÷ rows "
        "compare a lock's CPU on each of three masters with a lone master's (a target above asks "
        "for at most 1.25×), and a master's share of the CPU follows its share of the locks, "
        "which is the share of the names that hash to its slots: of the names, "
     << names_per_master(r, 64) << " at 64 in flight, " << names_per_master(r, 256)
     << " at 256. What it does not show: that a cluster scales. Every server "
        "and the client share the CPUs of the placement above ("
     << placement
     << "), so three masters cannot do more work per second than one, and locks/s measures the "
        "client and this machine; it is here to show that routing by slot costs the client "
        "little. The CPU includes each server's background work during the run (cron, the "
        "cluster bus), and nothing here covers replicas, failovers or a network.\n\n"
     << "### Cost of a redirect\n\n"
     << "One name on the 3-master cluster, its cycles timed one by one; a cycle is try_lock with "
        "a ttl of 1 s, again after retry_delay (50 ms, as lock() naps) until granted, then "
        "unlock. Before each of "
     << r.redirect.moves
     << " *stale* cycles the name's slot is moved to the next master (CLUSTER SETSLOT "
        "IMPORTING/MIGRATING, MIGRATE, then SETSLOT NODE on every master, as `redis-cli "
        "--cluster reshard` does), so the client's slot map is out of date and the acquire "
        "meets MOVED; before each move, "
     << r.redirect.fresh_per_move
     << " cycles with a fresh map (same name, same master since the last move). The client rests "
     << fixed(r.redirect.rest_ms, 0)
     << " ms after each stale cycle, longer than its slot-map refresh limit (one per 100 ms), "
        "so no refresh reaches into the next timed cycles; the masters count the MOVED replies "
        "(`INFO errorstats`). Times in µs.\n\n";
  redirect_table(r, md);
  const RedirectCost& c = r.redirect;
  if (c.stale.n > 0 && c.stale_attempts > static_cast<int>(c.stale.n)) {
    md << "\nWhat a stale map costs is not one redirected request: dlock resends the acquire "
          "where MOVED points and corrects that slot at once, but a slot that changes master "
          "changes the cluster node's epoch, and a round under way then does not count "
          "(docs/safety.md, *Resharding costs availability*): the lock is given back and "
          "try_lock is refused with quorum_not_reached; the next try_lock greets the cluster "
          "again (INFO of every master, then hello) and finds a new boot identity, which covers "
          "the slot map (the slot may have come without its keys): the cluster sits out of "
          "quorums for the largest live ttl (1 s here, 30 s with the default ttl), and only "
          "then is the lock granted. The stale row is that quarantine.\n\n";
  } else {
    md << "\nA stale map costs one redirected request: dlock resends the acquire where MOVED "
          "points and corrects that slot at once (the release goes straight there), and asks "
          "for the whole map again in the background.\n\n";
  }
  md << "ASK is not measured: while a slot migrates, dlock's acquire script (six keys of the "
        "slot) meets ASK on the old master and then TRYAGAIN on the new one, which Redis answers "
        "to any multi-key command there while some of its keys are missing; dlock retries TRYAGAIN "
        "until its deadline, so an acquisition in a migrating slot waits for the migration or "
        "fails (docs/safety.md) rather than paying an ASK round trip.\n";
}

void write_cluster_csv(const ClusterResults& r, std::ostream& csv) {
  for (const auto& [masters, ms] : r.idle_cpu_ms_per_s) {
    csv << "cluster,idle," << masters << ",server_cpu_per_master," << ms << ",ms_per_s\n";
  }
  for (const auto& [masters, by] : r.load) {
    const std::string impl =
        "dlock async, " + std::to_string(masters) + (masters == 1 ? " master" : " masters");
    for (const auto& [k, l] : by) {
      const auto row = [&](const std::string& metric, double v, const char* unit) {
        csv << "cluster," << impl << "," << k << "," << metric << "," << v << "," << unit << "\n";
      };
      row("locks", l.locks_per_second, "per_s");
      row("server_cpu_all_masters", l.cpu_ms_per_1000, "ms_per_1000_locks");
      row("scripts_per_lock", l.scripts_per_lock, "count");
      for (std::size_t m = 0; m < l.master_cpu_share.size(); ++m) {
        const std::string master = "master" + std::to_string(m + 1) + "_";
        row(master + "server_cpu", l.master_cpu_ms_per_1000[m], "ms_per_1000_locks");
        row(master + "cpu_share", l.master_cpu_share[m], "share");
        row(master + "lock_share", l.master_lock_share[m], "share");
      }
    }
  }
  const RedirectCost& c = r.redirect;
  const auto row = [&](const char* metric, double v, const char* unit) {
    csv << "cluster_redirect,dlock,3," << metric << "," << v << "," << unit << "\n";
  };
  row("fresh_p50", c.fresh.p50, "us");
  row("fresh_p99", c.fresh.p99, "us");
  row("stale_p50", c.stale.p50, "us");
  row("stale_p99", c.stale.p99, "us");
  row("stale_refused_p50", c.stale_refused.p50, "us");
  row("stale_over_fresh_p50", c.stale.p50 / c.fresh.p50, "ratio");
  if (c.stale.n > 0) {
    row("stale_try_locks_per_cycle", static_cast<double>(c.stale_attempts) / c.stale.n, "count");
  }
  row("moved_replies_per_cycle", c.moved_replies_per_cycle, "count");
}

}  // namespace dlock::bench

// SPDX-License-Identifier: MIT
#include "report.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <vector>

#include "cluster_report.h"
#include "service_report.h"

namespace dlock::bench {
namespace {

std::string fixed(double v, int digits = 1) {
  if (std::isnan(v)) return "–";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string thousands(double v) {
  std::string s = std::to_string(static_cast<long long>(std::llround(v)));
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

std::string ms(double us) {
  return fixed(us / 1000.0, us < 10000 ? 2 : 0);
}

std::string ratio(double v) {
  return std::isnan(v) || std::isinf(v) ? "–" : fixed(v, 2) + "×";
}

template <typename M, typename K>
const typename M::mapped_type* find(const M& m, const K& k) {
  auto it = m.find(k);
  return it == m.end() ? nullptr : &it->second;
}

double p50(const Results& r, const std::string& impl, int nodes) {
  const auto* by = find(r.latency, impl);
  const auto* s = by ? find(*by, nodes) : nullptr;
  return s ? s->p50 : NAN;
}

double many(const std::map<std::string, std::map<int, std::map<int, double>>>& m,
            const std::string& impl, int nodes, int k) {
  const auto* by = find(m, impl);
  const auto* n = by ? find(*by, nodes) : nullptr;
  const auto* v = n ? find(*n, k) : nullptr;
  return v ? *v : NAN;
}

double tput(const Results& r, const std::string& impl, int k) {
  const auto* by = find(r.throughput, impl);
  const auto* v = by ? find(*by, k) : nullptr;
  return v ? *v : NAN;
}

struct Target {
  std::string what;
  std::string measured;
  bool met;
};

// Issue 32's own targets (a lean protocol) that no row above states: Redis CPU per cycle at 1
// and 64 in flight on 1 node (the asio API's rows of "Many in flight"), the client's
// instructions (callgrind), and Redis memory per held lock and per name after its ttl.
std::vector<Target> lean_protocol_targets(const Results& r) {
  std::vector<Target> t;
  if (r.server_us.count(kDlockAsync)) {
    const double one = many(r.server_us, kDlockAsync, 1, 1) / many(r.server_us, kRaw, 1, 1);
    t.push_back({"Redis CPU per cycle (1 in flight, 1 node) ≤ 2 × the floor's (issue 32)",
                 ratio(one), one <= 2});
    const double busy = many(r.server_us, kDlockAsync, 1, 64) / many(r.server_us, kRaw, 1, 64);
    t.push_back({"Redis CPU per cycle (64 in flight, 1 node) ≤ 1.0 × the floor's (issue 32)",
                 ratio(busy), busy <= 1.0});
  }
  if (const auto* d = find(r.instructions, kDlock)) {
    if (const auto* raw = find(r.instructions, kRaw)) {
      const double x = *d / *raw;
      t.push_back({"client instructions per cycle (callgrind, 1 node) ≤ 1.5 × hiredis's (issue 32)",
                   ratio(x), x <= 1.5});
    }
  }
  if (const auto* d = find(r.memory_per_lock, kDlock)) {
    if (const auto* raw = find(r.memory_per_lock, kRaw)) {
      const double x = *d / *raw;
      t.push_back(
          {"Redis memory per held lock ≤ 1.5 × the floor's (issue 32)", ratio(x), x <= 1.5});
    }
  }
  if (const auto* f = find(r.memory_per_name, kDlock)) {
    // Redis's own allocations move by a few bytes either way: a key per 100 names would not.
    t.push_back({"nothing left per name once its ttl passed (issue 32)",
                 fixed(f->keys_per_name, 4) + " keys per name", f->keys_per_name < 0.01});
  }
  return t;
}

std::vector<Target> targets(const Results& r) {
  std::vector<Target> t;
  const double rtt = p50(r, kRaw, 1) / 2;  // one raw round trip: half a raw cycle
  const double one = p50(r, kDlock, 1) / p50(r, kRaw, 1);
  t.push_back({"1-node cycle ≤ 1.3 × raw floor (p50, issue 13)", ratio(one), one <= 1.3});
  if (r.latency.count(kDlockNew)) {
    for (int n : {1, 5}) {
      const std::string on = n == 1 ? "1-node" : "5-node";
      const double x = p50(r, kDlockNew, n) / p50(r, kRawNew, n);
      t.push_back({on + " cycle, a new name per cycle, ≤ 1.3 × raw floor likewise (p50)", ratio(x),
                   x <= 1.3});
      const double y = p50(r, kDlockNew, n) / p50(r, kDlock, n);
      t.push_back({on + " cycle: a new name per cycle ≤ 1.1 × one name (p50)", ratio(y), y <= 1.1});
    }
  }
  const double five = p50(r, kDlock, 5) / p50(r, kRaw, 5);
  t.push_back({"5-node cycle ≤ 1.3 × raw return-at-quorum floor (p50)", ratio(five), five <= 1.3});
  if (r.latency.count(kRawAll)) {
    // Not a target of the issue: the same floor with dlock's rule (acquire waits for all).
    const double all = p50(r, kDlock, 5) / p50(r, kRawAll, 5);
    t.push_back({"(reference) 5-node cycle ≤ 1.3 × raw floor whose acquire waits for all 5 (p50)",
                 ratio(all), all <= 1.3});
  }
  if (r.latency.count(kRedlock)) {
    const double vs = p50(r, kRedlock, 5) / p50(r, kDlock, 5);
    t.push_back({"5-node cycle faster than node-redlock (p50)",
                 "node-redlock ÷ dlock = " + ratio(vs), vs > 1});
    t.push_back({"5-node cycle faster than node-redlock by ≥ 1.2 × (p50, issue 32)",
                 "node-redlock ÷ dlock = " + ratio(vs), vs >= 1.2});
  }
  for (const auto& mode : {kDlock, kDlockFair}) {
    const auto* c = find(r.contention, mode);
    if (!c) continue;
    const double rtts = c->handoff.mean / rtt;
    t.push_back({mode + ": hand-off ≤ 3 raw round trips (mean)", fixed(rtts, 2) + " round trips",
                 rtts <= 3});
    for (const auto& peer : {kRedisPy, kRedlock}) {
      const auto* p = find(r.contention, peer);
      if (!p) continue;
      const double h = p->handoff.mean / c->handoff.mean;
      t.push_back({mode + ": hand-off ≥ 20 × faster than " + peer + " (mean)", ratio(h), h >= 20});
      const double w = p->wait.p99 / c->wait.p99;
      t.push_back({mode + ": wait p99 ≥ 10 × lower than " + peer, ratio(w), w >= 10});
    }
  }
  if (const auto* f = find(r.contention, kDlockFair)) {
    const double hold = r.hold_us + f->handoff.mean;
    const double bound = (r.contention_workers - 1) * hold;
    const double x = f->wait.p99 / bound;
    const std::string others = std::to_string(r.contention_workers - 1);
    t.push_back({"dlock fair: wait p99 close to the FIFO bound (" + others + " holds + " + others +
                     " hand-offs = " + ms(bound) + " ms; ≤ 1.5 × counts as close)",
                 ratio(x), x <= 1.5});
  }
  const double half = tput(r, kDlock, 64) / tput(r, kRaw, 64);
  t.push_back({"64 in flight (threads) ≥ 0.5 × raw pipelined floor", ratio(half), half >= 0.5});
  if (r.in_flight.count(kDlockAsync)) {
    for (int n : {1, 5}) {
      const std::string on = n == 1 ? "1 node" : "5 nodes";
      const double x = many(r.in_flight, kDlockAsync, n, 64) / many(r.in_flight, kRaw, n, 64);
      t.push_back(
          {"asio API, 64 in flight, " + on + ": ≥ 0.5 × raw pipelined floor", ratio(x), x >= 0.5});
      if (r.in_flight.count(kRedlock)) {
        const double y = many(r.in_flight, kDlockAsync, n, 64) / many(r.in_flight, kRedlock, n, 64);
        t.push_back({"asio API, 64 in flight, " + on + ": ≥ 3 × node-redlock", ratio(y), y >= 3});
      }
      const double c = many(r.server_us, kDlockAsync, n, 64) / many(r.server_us, kRaw, n, 64);
      t.push_back({"Redis CPU per cycle (64 in flight, " + on + ") ≤ 1.6 × the floor's", ratio(c),
                   c <= 1.6});
    }
  }
  for (auto& row : lean_protocol_targets(r)) t.push_back(std::move(row));
  for (const auto& peer : {kRedisPy, kRedlock}) {
    if (!r.throughput.count(peer)) continue;
    const double x = tput(r, kDlock, 64) / tput(r, peer, 64);
    t.push_back({"64 in flight: more than " + peer, ratio(x), x > 1});
  }
  if (r.cluster) {
    const double spread = cluster_share_spread(*r.cluster);
    t.push_back(
        {"Redis Cluster, 3 masters, 256 in flight: the masters' shares of Redis CPU even "
         "(largest ÷ smallest ≤ 1.25)",
         ratio(spread), spread <= 1.25});
    const double cost = cluster_cpu_per_lock_ratio(*r.cluster);
    t.push_back(
        {"Redis Cluster, 256 in flight: Redis CPU per lock on each of 3 masters ≤ 1.25 × "
         "on a lone master",
         ratio(cost), cost <= 1.25});
  }
  if (r.service) {
    for (const auto& s : service_targets(*r.service)) t.push_back({s.what, s.measured, s.met});
  }
  const double per_tick = r.watchdog.commands_per_second * r.watchdog_ttl_ms / 3000.0;
  const double batches = std::ceil(r.watchdog_locks / 256.0);
  t.push_back({"watchdog, " + thousands(r.watchdog_locks) + " locks: one batched round per tick (" +
                   fixed(batches, 0) + " renew commands of 256 locks, sent together)",
               fixed(per_tick, 1) + " commands per tick", per_tick <= batches * 1.1});
  t.push_back({"watchdog: client CPU < 10% of a core",
               fixed(r.watchdog.client_cpu_percent, 2) + "%", r.watchdog.client_cpu_percent < 10});
  return t;
}

void write_csv(const Results& r, const std::filesystem::path& path) {
  std::ofstream out(path);
  out << "section,implementation,nodes_or_inflight,metric,value,unit\n";
  for (const auto& [impl, by] : r.latency) {
    for (const auto& [nodes, s] : by) {
      for (auto [m, v] :
           {std::pair{"p50", s.p50}, {"p99", s.p99}, {"mean", s.mean}, {"max", s.max}}) {
        out << "uncontended," << impl << "," << nodes << "," << m << "," << v << ",us\n";
      }
    }
  }
  for (const auto& [impl, by] : r.throughput) {
    for (const auto& [k, v] : by)
      out << "throughput," << impl << "," << k << ",cycles," << v << ",per_s\n";
  }
  for (const auto& [impl, by] : r.mixed) {
    for (const auto& [n, v] : by)
      out << "shared," << impl << "," << n << ",sections," << v << ",per_s\n";
  }
  for (const auto& [impl, by] : r.in_flight) {
    for (const auto& [n, ks] : by) {
      for (const auto& [k, v] : ks) {
        out << "in_flight_" << n << "_nodes," << impl << "," << k << ",cycles," << v << ",per_s\n";
        out << "in_flight_" << n << "_nodes," << impl << "," << k << ",server_cpu,"
            << many(r.server_us, impl, n, k) << ",us_per_cycle\n";
      }
    }
  }
  for (const auto& [impl, c] : r.contention) {
    const auto row = [&](const char* m, double v, const char* unit) {
      out << "contention," << impl << ",1," << m << "," << v << "," << unit << "\n";
    };
    row("handoff_mean", c.handoff.mean, "us");
    row("handoff_p50", c.handoff.p50, "us");
    row("handoff_p99", c.handoff.p99, "us");
    row("wait_p50", c.wait.p50, "us");
    row("wait_p99", c.wait.p99, "us");
    row("wait_max", c.wait.max, "us");
    row("barging", c.barging, "share");
    row("overlaps", static_cast<double>(c.overlaps), "count");
    row("acquisitions", static_cast<double>(c.acquisitions), "count");
  }
  out << "watchdog,dlock,1,commands," << r.watchdog.commands_per_second << ",per_s\n";
  out << "watchdog,dlock,1,client_cpu," << r.watchdog.client_cpu_percent << ",percent\n";
  for (const auto& [impl, v] : r.memory_per_lock)
    out << "memory," << impl << ",1,per_lock," << v << ",bytes\n";
  for (const auto& [impl, f] : r.memory_per_name) {
    out << "memory," << impl << ",1,per_name_used," << f.bytes_per_name << ",bytes\n";
    out << "memory," << impl << ",1,keys_per_name_used," << f.keys_per_name << ",keys\n";
  }
  for (const auto& [impl, v] : r.instructions)
    out << "callgrind," << impl << ",1,per_cycle," << v << ",instructions\n";
  if (r.cluster) write_cluster_csv(*r.cluster, out);
  if (r.service) write_service_csv(*r.service, out);
}

// Two panels: the uncontended cycle, and the wait under contention (log scale).
void write_plot(const Results& r, const std::filesystem::path& png) {
  std::ostringstream g;
  g << "set terminal pngcairo size 1200,600 font 'DejaVu Sans,10'\n"
    << "set output '" << png.string() << "'\n"
    << "set multiplot layout 1,2\n"
    << "set style data histograms\nset style histogram clustered gap 1\n"
    << "set style fill solid 0.85 border -1\nset boxwidth 0.9\nset grid ytics\n"
    << "set xtics rotate by -25 noenhanced\nset key outside top center horizontal noenhanced\n"
    << "set logscale y\n";
  g << "$lat << EOD\nimpl \"1 node p50\" \"1 node p99\" \"5 nodes p50\" \"5 nodes p99\"\n";
  for (const auto& impl : {kRaw, kNaive, kRedisPy, kRedlock, kDlock}) {
    const auto* by = find(r.latency, impl);
    if (!by) continue;
    const auto v = [&](int n, bool p99) {
      const auto* s = find(*by, n);
      return s ? fixed(p99 ? s->p99 : s->p50) : std::string("NaN");
    };
    g << "\"" << impl << "\" " << v(1, false) << " " << v(1, true) << " " << v(5, false) << " "
      << v(5, true) << "\n";
  }
  g << "EOD\n"
    << "set title 'Uncontended acquire + release (µs, log scale, lower is better)'\n"
    << "set ylabel 'µs'\n"
    << "plot for [c=2:5] $lat using c:xtic(1) title columnhead\n";
  g << "$wait << EOD\nimpl \"hand-off mean\" \"wait p50\" \"wait p99\" \"wait max\"\n";
  for (const auto& impl : {kNaive, kRedisPy, kRedlock, kDlock, kDlockFair}) {
    const auto* c = find(r.contention, impl);
    if (!c) continue;
    g << "\"" << impl << "\" " << fixed(c->handoff.mean / 1000, 3) << " "
      << fixed(c->wait.p50 / 1000, 3) << " " << fixed(c->wait.p99 / 1000, 3) << " "
      << fixed(c->wait.max / 1000, 3) << "\n";
  }
  g << "EOD\n"
    << "set title 'Contention: " << r.contention_workers << " processes, hold "
    << r.hold_us / 1000.0 << " ms (ms, log scale)'\nset ylabel 'ms'\n"
    << "plot for [c=2:5] $wait using c:xtic(1) title columnhead\n"
    << "unset multiplot\n";
  FILE* p = popen("gnuplot 2>/dev/null", "w");  // a partial run (--only) leaves empty panels
  if (p == nullptr) return;
  const std::string script = g.str();
  fwrite(script.data(), 1, script.size(), p);
  pclose(p);
}

}  // namespace

void write_report(const Results& r, const std::filesystem::path& dir, const std::string& notes) {
  std::filesystem::create_directories(dir);
  write_csv(r, dir / "performance.csv");
  write_plot(r, dir / "performance.png");

  std::ofstream md(dir / "performance.md");
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  md << "# Performance\n\n"
     << "<!-- Generated by bench/report.cc: edit bench/notes.md, then rerun. -->\n\n"
     << "Produced by `bash bench/run.sh` (`" << r.command << "`) on " << date
     << ". Every row was measured in the same run, on the same redis-server processes "
     << "(no persistence, loopback).\n\n"
     << "- Placement: " << r.placement << ".\n"
     << "- Versions: " << r.versions << ".\n"
     << "- Numbers: microseconds unless marked; p50 and p99 are nearest-rank percentiles. "
     << "Ratios are the comparisons that mean something on a noisy 2-core machine.\n";
  if (r.smoke) md << "\n**Smoke run: a few iterations only. These numbers mean nothing.**\n";

  md << "\n## Targets\n\n| target | measured | met |\n|---|---|---|\n";
  for (const auto& t : targets(r))
    md << "| " << t.what << " | " << t.measured << " | " << (t.met ? "yes" : "**no**") << " |\n";

  md << "\n## Uncontended acquire + release\n\n"
     << "One name, one caller, acquire then release, over and over. dlock runs with the defaults "
        "a user gets (ttl 30 s, watchdog on).\n\n"
     << "| implementation | 1 node p50 | 1 node p99 | 5 nodes p50 | 5 nodes p99 | "
        "this ÷ dlock, 1 node | this ÷ dlock, 5 nodes |\n|---|---|---|---|---|---|---|\n";
  for (const auto& impl : {kRaw, kRawAll, kNaive, kRedisPy, kRedlock, kDlock, kRawNew, kDlockNew}) {
    const auto* by = find(r.latency, impl);
    if (!by) continue;
    md << "| " << impl;
    for (int n : {1, 5}) {
      const auto* s = find(*by, n);
      md << " | " << (s ? fixed(s->p50) : "–") << " | " << (s ? fixed(s->p99) : "–");
    }
    for (int n : {1, 5}) md << " | " << ratio(p50(r, impl, n) / p50(r, kDlock, n));
    md << " |\n";
  }

  md << "\n## Throughput\n\n"
     << "Acquire+release cycles per second on one node, with 1, 16 and 64 cycles in flight from "
        "one process on distinct names: dlock and redis-py with that many threads, node-redlock "
        "with that many concurrent promises, the raw floor pipelined on one connection.\n\n"
     << "| implementation | 1 in flight | 16 | 64 | dlock ÷ this at 64 |\n|---|---|---|---|---|\n";
  for (const auto& impl : {kRaw, kRedisPy, kRedlock, kDlock}) {
    if (!r.throughput.count(impl)) continue;
    md << "| " << impl;
    for (int k : {1, 16, 64}) md << " | " << thousands(tput(r, impl, k));
    md << " | " << ratio(tput(r, kDlock, 64) / tput(r, impl, 64)) << " |\n";
  }

  if (!r.in_flight.empty()) {
    md << "\n## Many in flight from one thread\n\n"
       << "Acquire+release cycles per second with 1, 16, 64 and 256 in flight on distinct names "
          "from one thread: dlock's asio API (that many coroutines on one io_context), "
          "node-redlock (that many concurrent promises), the raw floor pipelined on one "
          "connection per node (SET NX PX then the compare-and-delete script, every node). In "
          "brackets: the redis-servers' CPU per cycle in µs (INFO used_cpu_user + used_cpu_sys, "
          "all nodes together). The raw floor and dlock: medians of three interleaved runs of "
          "2/3 s each; node-redlock: one run of 2 s.\n\n"
       << "| implementation | 1 node: 1 | 16 | 64 | 256 | 5 nodes: 1 | 16 | 64 | 256 |\n"
       << "|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& impl : {kRaw, kRedlock, kDlockAsync}) {
      if (!r.in_flight.count(impl)) continue;
      md << "| " << impl;
      for (int n : {1, 5}) {
        for (int k : {1, 16, 64, 256}) {
          md << " | " << thousands(many(r.in_flight, impl, n, k)) << " ("
             << fixed(many(r.server_us, impl, n, k)) << ")";
        }
      }
      md << " |\n";
    }
    for (const auto& peer : {kRaw, kRedlock}) {
      if (!r.in_flight.count(peer)) continue;
      md << "| dlock async ÷ " << peer;
      for (int n : {1, 5}) {
        for (int k : {1, 16, 64, 256}) {
          md << " | "
             << ratio(many(r.in_flight, kDlockAsync, n, k) / many(r.in_flight, peer, n, k));
        }
      }
      md << " |\n";
    }
  }

  md << "\n## Contention\n\n"
     << r.contention_workers << " processes take one name " << r.contention_count
     << " times each and hold it " << r.hold_us / 1000.0
     << " ms, on one node. Hand-off: for each release that another worker was waiting for, the "
        "time "
        "until one of the waiting workers held the lock (a barging worker in between counts "
        "against it). Wait: from asking to holding. Barging: share of acquisitions taken by a "
        "worker that was not waiting (the releaser, coming back) while others waited. Peers that "
        "poll retry every "
     << r.retry_ms
     << " ms (redis-py's default is 100 ms, node-redlock's 200 ± 100 ms); the naive lock "
        "sleeps a random 0-100 ms, as in seed 000. Times in ms.\n\n"
     << "| implementation | hand-off mean | p50 | p99 | wait p50 | wait p99 | wait max | barging | "
        "overlaps | hand-off ÷ dlock's | wait p99 ÷ dlock's "
        "|\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  const auto* d = find(r.contention, kDlock);
  for (const auto& impl : {kNaive, kRedisPy, kRedlock, kDlock, kDlockFair}) {
    const auto* c = find(r.contention, impl);
    if (!c) continue;
    md << "| " << impl << " | " << ms(c->handoff.mean) << " | " << ms(c->handoff.p50) << " | "
       << ms(c->handoff.p99) << " | " << ms(c->wait.p50) << " | " << ms(c->wait.p99) << " | "
       << ms(c->wait.max) << " | " << fixed(100 * c->barging) << "% | " << c->overlaps << " | "
       << (d ? ratio(c->handoff.mean / d->handoff.mean) : "–") << " | "
       << (d ? ratio(c->wait.p99 / d->wait.p99) : "–") << " |\n";
  }

  if (const auto* unset = find(r.latency, kObserverUnset)) {
    md << "\n## Observer cost\n\n"
       << "Uncontended cycles on one node, as above, in five interleaved rounds: without an "
          "observer (the default), with an Observer that does nothing (every hook called), and "
          "with PrometheusObserver (docs/metrics.md). Instructions: callgrind, client side.\n\n"
       << "| client | p50 | p99 | p50 ÷ unset | instructions per cycle | more than unset |\n"
       << "|---|---|---|---|---|---|\n";
    const auto* base = find(*unset, 1);
    const auto* base_instructions = find(r.instructions, kObserverUnset);
    for (const auto& impl : {kObserverUnset, kObserverNoop, kObserverPrometheus}) {
      const auto* by = find(r.latency, impl);
      const auto* l = by ? find(*by, 1) : nullptr;
      const auto* ins = find(r.instructions, impl);
      md << "| " << impl << " | " << (l ? fixed(l->p50) : "–") << " | " << (l ? fixed(l->p99) : "–")
         << " | " << (l && base ? ratio(l->p50 / base->p50) : "–") << " | "
         << (ins ? thousands(*ins) : "–") << " | "
         << (ins && base_instructions ? fixed(*ins - *base_instructions, 0) + " (" +
                                            fixed(100 * (*ins / *base_instructions - 1), 2) + "%)"
                                      : "–")
         << " |\n";
    }
  }

  if (!r.mixed.empty()) {
    md << "\n## Read-write lock and semaphore\n\n"
       << r.mixed_threads << " threads of one client take one name for a few seconds; each "
       << "critical section holds it " << r.mixed_hold_us / 1000.0 << " ms and is a read with "
       << "probability " << fixed(r.mixed_read_share, 2) << ". Guarded by a Mutex (every section "
       << "exclusive: what one uses without a read-write lock) or by a SharedMutex (reads "
       << "shared, writes exclusive), or by a Semaphore of 4 permits (every section takes one). "
       << "Critical sections per second, all threads together.\n\n"
       << "| guard | 1 node | 5 nodes | ÷ Mutex, 1 node | ÷ Mutex, 5 nodes |\n"
       << "|---|---|---|---|---|\n";
    for (const auto& impl : {kMixedMutex, kMixedShared, kMixedSemaphore}) {
      const auto* by = find(r.mixed, impl);
      const auto* base = find(r.mixed, kMixedMutex);
      if (!by) continue;
      md << "| " << impl;
      for (int n : {1, 5}) md << " | " << (find(*by, n) ? thousands(*find(*by, n)) : "–");
      for (int n : {1, 5}) {
        const double* v = find(*by, n);
        const double* b = base ? find(*base, n) : nullptr;
        md << " | " << (v && b && *b > 0 ? ratio(*v / *b) : "–");
      }
      md << " |\n";
    }
  }

  if (r.cluster) write_cluster_markdown(*r.cluster, r.placement, md);
  if (r.service) write_service_markdown(*r.service, md);

  md << "\n## Watchdog, memory, instructions\n\n"
     << "- Watchdog: " << thousands(r.watchdog_locks) << " locks held by one client with ttl "
     << r.watchdog_ttl_ms << " ms, renewed every " << r.watchdog_ttl_ms / 3
     << " ms: " << thousands(r.watchdog.commands_per_second)
     << " commands per second reached Redis ("
     << fixed(r.watchdog.commands_per_second * r.watchdog_ttl_ms / 3000.0, 1)
     << " per tick), client CPU " << fixed(r.watchdog.client_cpu_percent, 2) << "% of one core.\n";
  for (const auto& [impl, v] : r.memory_per_lock) {
    md << "- Redis memory per held lock, " << impl << ": " << fixed(v, 0) << " bytes"
       << (impl == kRaw ? " (one string key: what redis-py and node-redlock store too)" : "")
       << ".\n";
  }
  for (const auto& [impl, f] : r.memory_per_name) {
    md << "- Redis memory per name ever used, " << impl << ", after " << thousands(r.memory_names)
       << " names were each locked and released once and their ttl passed: "
       << fixed(f.bytes_per_name, 1) << " bytes and " << fixed(f.keys_per_name, 4)
       << " keys per name.\n";
  }
  for (const auto& [impl, v] : r.instructions) {
    if (impl == kObserverUnset || impl == kObserverNoop || impl == kObserverPrometheus) continue;
    md << "- Client instructions per uncontended cycle (callgrind, 1 node), " << impl << ": "
       << thousands(v) << ".\n";
  }
  md << "\n![uncontended latency and contention waits](performance.png)\n\n"
     << "Every number above is in [performance.csv](performance.csv).\n\n"
     << notes;
}

}  // namespace dlock::bench

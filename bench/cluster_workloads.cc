// SPDX-License-Identifier: MIT
#include "cluster_workloads.h"

#include <dlock/dlock.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <thread>

#include "stats.h"
#include "workloads.h"

namespace dlock::bench {
namespace {

using namespace std::chrono_literals;

// One run of async_throughput on `cluster`, with the masters' counters read around it.
ClusterLoad load_once(const MeasuredCluster& cluster, int inflight, std::chrono::milliseconds run,
                      std::optional<std::chrono::milliseconds> ttl) {
  const auto before = cluster.counters();
  ClusterLoad l;
  l.locks_per_second = async_throughput({cluster.url()}, inflight, run, ttl);
  const auto after = cluster.counters();
  std::vector<double> cpu;
  std::vector<double> calls;
  for (std::size_t m = 0; m < before.size(); ++m) {
    cpu.push_back(after[m].cpu_seconds - before[m].cpu_seconds);
    calls.push_back(static_cast<double>(after[m].script_calls - before[m].script_calls));
  }
  // Counted by the servers, not the client: the cycles still in flight when the run stopped
  // used their CPU too. A cycle is two scripts (acquire, release); the client's one greeting
  // script is lost in the thousands.
  const double all_cpu = std::accumulate(cpu.begin(), cpu.end(), 0.0);
  const double all_calls = std::accumulate(calls.begin(), calls.end(), 0.0);
  if (all_calls <= 0) throw std::runtime_error("cluster: no script reached a master");
  l.cpu_ms_per_1000 = all_cpu * 1e3 / (all_calls / 2 / 1e3);
  l.scripts_per_lock =
      all_calls / (l.locks_per_second * std::chrono::duration<double>(run).count());
  for (std::size_t m = 0; m < cpu.size(); ++m) {
    l.master_cpu_ms_per_1000.push_back(calls[m] > 0 ? cpu[m] * 1e3 / (calls[m] / 2 / 1e3) : NAN);
    l.master_cpu_share.push_back(all_cpu > 0 ? cpu[m] / all_cpu : NAN);
    l.master_lock_share.push_back(calls[m] / all_calls);
  }
  return l;
}

// The median of every field over `runs` (all of one cluster and in-flight count).
ClusterLoad medians(const std::vector<ClusterLoad>& runs) {
  const auto of = [&](auto field) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(field(r));
    return median(std::move(v));
  };
  ClusterLoad m;
  m.locks_per_second = of([](const ClusterLoad& r) { return r.locks_per_second; });
  m.cpu_ms_per_1000 = of([](const ClusterLoad& r) { return r.cpu_ms_per_1000; });
  m.scripts_per_lock = of([](const ClusterLoad& r) { return r.scripts_per_lock; });
  for (std::size_t i = 0; i < runs.front().master_cpu_share.size(); ++i) {
    m.master_cpu_ms_per_1000.push_back(
        of([i](const ClusterLoad& r) { return r.master_cpu_ms_per_1000[i]; }));
    m.master_cpu_share.push_back(of([i](const ClusterLoad& r) { return r.master_cpu_share[i]; }));
    m.master_lock_share.push_back(of([i](const ClusterLoad& r) { return r.master_lock_share[i]; }));
  }
  return m;
}

double idle_cpu(const MeasuredCluster& cluster, std::chrono::milliseconds window) {
  const auto before = cluster.counters();
  const auto t0 = monotonic_ns();
  std::this_thread::sleep_for(window);
  const auto after = cluster.counters();
  const double seconds = static_cast<double>(monotonic_ns() - t0) / 1e9;
  double cpu = 0;
  for (std::size_t m = 0; m < before.size(); ++m) {
    cpu += after[m].cpu_seconds - before[m].cpu_seconds;
  }
  return cpu * 1e3 / seconds / static_cast<double>(before.size());
}

long long moved_replies(const MeasuredCluster& cluster) {
  long long n = 0;
  for (const auto& c : cluster.counters()) n += c.moved;
  return n;
}

// Before each timed stale cycle the slot goes to the next master. Between moves the client is
// left alone for longer than kClientRefreshInterval: the slot-map refresh the last MOVED
// asked for has run, and none is deferred into the cycles timed next.
//
// A cycle is try_lock, again after retry_delay (as Client::lock() naps) until granted, then
// unlock: the try_lock that meets MOVED is refused (ClusterNode::set_owner starts a new epoch
// when a slot changes master, and a grant counts only at the epoch it was asked at,
// Membership::View::may_vote), the next one greets the cluster again, finds a new identity
// (it covers the slot map: the slot may have come without its keys) and the cluster sits out
// the largest live ttl. The ttl here is kRedirectTtl, so that a quarantine is short (this
// section runs before the load sections, whose default ttl would be the largest live one).
constexpr auto kRedirectTtl = std::chrono::milliseconds(1000);
// How often at most a cluster client refreshes its slot map (ClusterNode::kRefreshInterval,
// an internal the benchmark does not include: keep the two equal).
constexpr auto kClientRefreshInterval = std::chrono::milliseconds(100);

RedirectCost redirect_cost(const MeasuredCluster& cluster, int moves, int fresh_per_move) {
  ClientOptions options;
  options.nodes = {cluster.url()};
  auto client = Client::create(options);
  if (!client) throw std::runtime_error("dlock: " + client.error().message());
  const std::string name = "bench:moved";
  const std::uint16_t slot = cluster.key_slot(name);
  LockOptions lock;  // the defaults a user gets, as in the other sections, but the ttl
  lock.ttl = kRedirectTtl;
  RedirectCost r;
  struct Cycle {
    std::int64_t ns = 0;
    std::int64_t refused_ns = 0;  // in try_lock calls that were refused
    int attempts = 0;
  };
  const auto cycle = [&] {
    Cycle c;
    const auto t0 = monotonic_ns();
    for (;;) {
      const auto t = monotonic_ns();
      ++c.attempts;
      auto lease = client->try_lock(name, lock);
      if (lease) {
        if (auto u = lease->unlock(); !u) throw std::runtime_error("dlock: " + u.error().message());
        break;
      }
      // A quarantine lasts the largest live ttl (kRedirectTtl): no cycle takes a minute.
      if (monotonic_ns() - t0 > 60'000'000'000) {
        throw std::runtime_error("dlock: " + lease.error().message());
      }
      r.refusal = lease.error().message();
      std::this_thread::sleep_for(lock.retry_delay);
      c.refused_ns += monotonic_ns() - t;
    }
    c.ns = monotonic_ns() - t0;
    return c;
  };
  const auto settle = kClientRefreshInterval + 50ms;
  const std::size_t masters = cluster.masters().size();
  std::size_t at = cluster.slot_owners()[slot];
  // Warm-up: a lap of moves, so every master has a connection and its scripts before timing.
  for (std::size_t i = 0; i <= masters; ++i) {
    for (int k = 0; k < 10; ++k) cycle();
    at = (at + 1) % masters;
    cluster.move_slot(slot, at);
    cycle();
    std::this_thread::sleep_for(settle);
  }
  std::vector<std::int64_t> fresh;
  std::vector<std::int64_t> stale;
  std::vector<std::int64_t> refused;
  const long long moved_before = moved_replies(cluster);
  for (int i = 0; i < moves; ++i) {
    for (int k = 0; k < fresh_per_move; ++k) {
      const Cycle c = cycle();
      fresh.push_back(c.ns);
      r.fresh_attempts += c.attempts;
    }
    at = (at + 1) % masters;
    cluster.move_slot(slot, at);
    const Cycle c = cycle();
    stale.push_back(c.ns);
    refused.push_back(c.refused_ns);
    r.stale_attempts += c.attempts;
    std::this_thread::sleep_for(settle);
  }
  r.moves = moves;
  r.fresh_per_move = fresh_per_move;
  r.rest_ms = static_cast<double>(std::chrono::milliseconds(settle).count());
  r.moved_replies_per_cycle =
      static_cast<double>(moved_replies(cluster) - moved_before) / static_cast<double>(moves);
  r.fresh = summarize(std::move(fresh));
  r.stale = summarize(std::move(stale));
  r.stale_refused = summarize(std::move(refused));
  return r;
}

}  // namespace

ClusterResults measure_clusters(const MeasuredCluster& one, const MeasuredCluster& three,
                                bool smoke, const std::function<void(const std::string&)>& say) {
  ClusterResults r;
  r.rounds = smoke ? 1 : 5;
  const auto run = smoke ? 100ms : 2000ms;
  r.run_ms = static_cast<double>(run.count());
  std::map<std::size_t, std::map<int, std::vector<ClusterLoad>>> runs;
  for (const MeasuredCluster* c : {&one, &three}) {
    r.idle_cpu_ms_per_s[c->masters().size()] = idle_cpu(*c, smoke ? 100ms : 1000ms);
  }
  // First: each of its moves quarantines the cluster for the largest live ttl, which the load
  // rounds' default ttl (30 s) would be for a minute after them (greetings keep announcing it).
  say("cluster: redirect cost");
  r.redirect = redirect_cost(three, smoke ? 3 : 60, smoke ? 2 : 3);
  // The last move's new identity keeps a client out for its own ttl: the default a user gets
  // in the real run; in a smoke run (whose numbers mean nothing) the redirect's short ttl, so
  // that CI does not wait 30 s.
  const std::optional<std::chrono::milliseconds> ttl =
      smoke ? std::optional(kRedirectTtl) : std::nullopt;
  const auto quarantine = ttl.value_or(LockOptions{}.ttl);
  say("cluster: waiting out the last move's quarantine for a " +
      std::to_string(quarantine.count()) + " ms ttl");
  std::this_thread::sleep_for(quarantine + 1s);
  for (int round = 0; round < r.rounds; ++round) {
    say("cluster: round " + std::to_string(round + 1) + " of " + std::to_string(r.rounds));
    for (const MeasuredCluster* c : {&one, &three}) {
      for (int k : {64, 256}) runs[c->masters().size()][k].push_back(load_once(*c, k, run, ttl));
    }
  }
  for (const MeasuredCluster* c : {&one, &three}) {
    const auto owners = c->slot_owners();
    auto& slots = r.slots[c->masters().size()];
    slots.assign(c->masters().size(), 0);
    for (std::size_t owner : owners) ++slots[owner];
    for (auto& [k, samples] : runs[c->masters().size()]) {
      ClusterLoad& l = r.load[c->masters().size()][k] = medians(samples);
      l.master_names.assign(c->masters().size(), 0);
      for (int i = 0; i < k; ++i) ++l.master_names[owners[c->key_slot(async_name(i))]];
    }
  }
  return r;
}

}  // namespace dlock::bench

// SPDX-License-Identifier: MIT
#include "faults.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <thread>
#include <tuple>

#include "node/slots.h"
#include "worker.h"

namespace dlock::chaos {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr unsigned kProcessKinds = 5;
constexpr unsigned kReplyKinds = 6;
constexpr unsigned kClusterKinds = 6;

// What the library sends on each call of these kinds names the lock in these keys and channels
// (docs/protocol.md): the release channel only in a release, the fencing counter only in an
// acquisition (and the token raise that completes one).
const std::string kReleaseMatch = std::string("dlock:release:{") + kName + "}";
const std::string kAcquireMatch = std::string("dlock:fence:{") + kName + "}";
// A permit holder's calls name a slot of the semaphore: all slots share the release channel,
// and each slot's counter begins with this (lock/keys.h).
const std::string kPermitReleaseMatch =
    std::string("dlock:release:{") + kSemaphore + "}:dlock:sem:{" + kSemaphore + "}";
const std::string kPermitAcquireMatch =
    std::string("dlock:fence:{") + kSemaphore + "}:dlock:sem:{" + kSemaphore + "}:";
// An async worker's calls name one of its names; a batch call names several, and the lost
// reply is then the reply of every call in it.
const std::string kAsyncReleaseMatch = std::string("dlock:release:{") + kAsyncPrefix;
const std::string kAsyncAcquireMatch = std::string("dlock:fence:{") + kAsyncPrefix;

// Waits until child `pid` is stopped by a signal; false if `limit` passed first.
bool wait_until_stopped(pid_t pid, milliseconds limit) {
  const auto until = Clock::now() + limit;
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WUNTRACED | WNOHANG) == pid && WIFSTOPPED(status)) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
}

}  // namespace

FaultSchedule::FaultSchedule(FaultTargets targets, unsigned seed, bool reply_faults)
    : t_(std::move(targets)), rng_(seed), reply_faults_(reply_faults && t_.nodes->has_proxies()) {}

milliseconds FaultSchedule::between(int from_ms, int to_ms) {
  return milliseconds(from_ms + static_cast<int>(rng_() % static_cast<unsigned>(to_ms - from_ms)));
}

milliseconds FaultSchedule::pause() {
  return between(300, 1000);
}

std::optional<Fault> FaultSchedule::inject() {
  std::optional<Fault> f = t_.nodes->clustered() ? cluster_fault() : standalone_fault();
  if (!f) return f;
  // Its effect lasts until the node votes again (a restarted node: one max ttl later).
  f->end_ns = real_now_ns() + (t_.max_ttl.count() + 1000) * 1'000'000;
  ++counts_[f->kind];
  return f;
}

std::optional<Fault> FaultSchedule::standalone_fault() {
  const unsigned kind = rng_() % (kProcessKinds + (reply_faults_ ? kReplyKinds : 0));
  const std::size_t node = rng_() % t_.nodes->size();
  if (kind < 4) return node_fault(kind, node);
  if (kind == 4) return pause_holder();
  if (kind < 9) return proxy_window(kind, node);
  return lose_reply(kind, node);
}

std::optional<Fault> FaultSchedule::cluster_fault() {
  const unsigned kind = rng_() % kClusterKinds;
  const std::size_t node = rng_() % t_.nodes->size();
  if (kind == 4) return pause_holder();
  auto& cluster = t_.nodes->cluster(node);
  const std::string name = "cluster-" + std::to_string(node + 1);
  // Most of the time the lock's own slot and master: where the holders and waiters are.
  const bool lock_slot = rng_() % 4 != 0;
  const unsigned pick = rng_();
  std::optional<Fault> f;
  std::string kind_name;
  if (kind < 2 || kind == 5) {
    kind_name = kind == 0 ? "failover" : kind == 1 ? "failover-lossy" : "freeze-master";
    FailoverPlan plan;
    plan.slot = node::key_slot(kName);
    plan.slot_master = lock_slot;
    plan.pick = pick;
    if (kind == 1) plan.lag = between(100, 600);
    if (kind == 5) {
      plan.freeze = true;
      plan.thawed_after = between(0, 1000);
    }
    f = fail_over(cluster, name, plan);
  } else if (kind == 2) {
    kind_name = "reshard";
    ReshardPlan plan;
    // Else the semaphore's slot when permit holders use it, or the lock's.
    const bool semaphore =
        !lock_slot && std::find(t_.permit_holders.begin(), t_.permit_holders.end(), true) !=
                          t_.permit_holders.end();
    plan.slot = node::key_slot(semaphore ? kSemaphore : kName);
    plan.pick = pick;
    plan.migrating = between(300, 1500);
    plan.migrated = between(100, 800);
    f = reshard(cluster, name, plan, redirects_);
  } else {
    kind_name = "stop-master";
    // Below the clusters' 2 s node timeout: a slow shard, not a failover.
    f = stop_master(cluster, name, pick, between(200, 1200));
  }
  if (!f) ++counts_[kind_name + " (missed)"];
  return f;
}

std::optional<Fault> FaultSchedule::node_fault(unsigned kind, std::size_t node) {
  if (kind == 0 && t_.solo_node == node) {
    // Not the solo node: a lone node restarted empty has lost its locks and its boot records
    // alike, so it cannot know it restarted and grants at once locks that are still held.
    // dlock does not protect that case, by design (docs/features.md, "Restarted-node
    // protection": "a single-node setup (the node cannot vouch for itself)"; docs/safety.md,
    // "What does not hold"). The next node is restarted empty instead; the solo node still
    // gets kill and restart-aof (restarted from its append-only file, it knows its old boot
    // and reports the restart), stop-node and the reply faults.
    node = (node + 1) % t_.nodes->size();
  }
  Fault f;
  f.start_ns = real_now_ns();
  f.target = "node-" + std::to_string(node + 1);
  auto& n = t_.nodes->node(node);
  if (kind == 0 || kind == 1) {
    f.kind = kind == 0 ? "restart-empty" : "restart-aof";
    n.kill9();
    std::this_thread::sleep_for(between(200, 1000));
    (void)n.restart(/*keep_data=*/kind == 1);
  } else if (kind == 2) {
    f.kind = "kill";
    n.kill9();
    std::this_thread::sleep_for(between(500, 2000));
    (void)n.restart(/*keep_data=*/true);
  } else {
    f.kind = "stop-node";
    n.pause();
    std::this_thread::sleep_for(between(200, 1500));
    n.resume();
  }
  return f;
}

std::optional<Fault> FaultSchedule::pause_holder() {
  const std::size_t w = next_worker_++ % t_.workers.size();
  if (w < static_cast<std::size_t>(t_.skewed)) return std::nullopt;
  Fault f;
  f.kind = "pause-holder";
  f.target = "worker-" + std::to_string(w + 1);
  // It stops itself at its next critical section, which may be a whole wait away; the pause is
  // timed from the moment it stopped, so the history shows when it really ran.
  const pid_t pid = t_.workers[w];
  kill(pid, SIGUSR1);
  if (!wait_until_stopped(pid, t_.wait + milliseconds(2000))) {
    kill(pid, SIGUSR2);  // withdrawn: a pause that began later would have no SIGCONT
    if (!wait_until_stopped(pid, milliseconds(200))) return std::nullopt;
  }
  f.start_ns = real_now_ns();
  std::this_thread::sleep_for(t_.ttl * 3);
  kill(pid, SIGCONT);
  return f;
}

std::optional<std::size_t> FaultSchedule::proxied_node(std::size_t node) {
  for (std::size_t k = 0; k < t_.nodes->size(); ++k) {
    const std::size_t candidate = (node + k) % t_.nodes->size();
    if (!t_.nodes->proxies_of(candidate).empty()) return candidate;
  }
  return std::nullopt;
}

std::optional<Fault> FaultSchedule::proxy_window(unsigned kind, std::size_t node) {
  const auto at = proxied_node(node);
  if (!at) return std::nullopt;
  const auto proxies = t_.nodes->proxies_of(*at);
  Fault f;
  f.start_ns = real_now_ns();
  f.target = "node-" + std::to_string(*at + 1);
  if (kind == 8) {
    f.kind = "cut";
    for (auto& [worker, proxy] : proxies) proxy->cut();
    return f;
  }
  milliseconds window{0};
  if (kind == 5) {
    f.kind = "drop-replies";
    window = between(150, 800);
    for (auto& [worker, proxy] : proxies) proxy->drop_replies();
  } else if (kind == 6) {
    const auto delay = between(30, 400);  // below and above the workers' 100 ms node timeout
    f.kind = "delay-replies";
    f.target += " by " + std::to_string(delay.count()) + "ms";
    window = between(300, 1500);
    for (auto& [worker, proxy] : proxies) proxy->delay_replies(delay);
  } else {
    f.kind = "blackhole";
    window = between(200, 1500);
    for (auto& [worker, proxy] : proxies) proxy->blackhole();
  }
  std::this_thread::sleep_for(window);
  for (auto& [worker, proxy] : proxies) proxy->forward();
  return f;
}

std::optional<Fault> FaultSchedule::lose_reply(unsigned kind, std::size_t node) {
  const auto at = proxied_node(node);
  if (!at) return std::nullopt;
  // (node, worker, proxy): one path to aim at.
  std::vector<std::tuple<std::size_t, int, test::TcpProxy*>> paths;
  for (const auto& [worker, proxy] : t_.nodes->proxies_of(*at))
    paths.emplace_back(*at, worker, proxy);
  // Half of them aim at a nesting worker, wherever it goes through a proxy: a lost reply in the
  // middle of reentrant leases is the case plain workers never reach.
  std::vector<std::tuple<std::size_t, int, test::TcpProxy*>> nesting;
  for (std::size_t n = 0; n < t_.nodes->size(); ++n) {
    for (const auto& [worker, proxy] : t_.nodes->proxies_of(n)) {
      if (t_.nesting[static_cast<std::size_t>(worker)]) nesting.emplace_back(n, worker, proxy);
    }
  }
  if (!nesting.empty() && rng_() % 2 == 0) paths = nesting;
  const auto [target, worker, proxy] = paths[rng_() % paths.size()];
  const bool then_cut = rng_() % 2 == 0;
  Fault f;
  f.kind = kind == 9 ? "lose-release-reply" : "lose-acquire-reply";
  f.target = "node-" + std::to_string(target + 1) + " worker-" + std::to_string(worker + 1) +
             (then_cut ? " then cut" : "");
  f.start_ns = real_now_ns();
  const auto w = static_cast<std::size_t>(worker);
  const bool permits = t_.permit_holders.size() > w && t_.permit_holders[w];
  const bool async = t_.async.size() > w && t_.async[w];
  if (permits) f.target += " (permits)";
  if (async) f.target += " (async)";
  const std::string& release_match = async     ? kAsyncReleaseMatch
                                     : permits ? kPermitReleaseMatch
                                               : kReleaseMatch;
  const std::string& acquire_match = async     ? kAsyncAcquireMatch
                                     : permits ? kPermitAcquireMatch
                                               : kAcquireMatch;
  proxy->lose_next_reply(kind == 9 ? release_match : acquire_match, then_cut);
  const auto until = Clock::now() + milliseconds(3000);
  while (proxy->armed() && Clock::now() < until) std::this_thread::sleep_for(milliseconds(5));
  if (proxy->armed()) {
    proxy->disarm();
    ++counts_[f.kind + " (missed)"];
    return std::nullopt;
  }
  return f;
}

}  // namespace dlock::chaos

// SPDX-License-Identifier: MIT
#include "runner.h"

#include <dlock/dlock.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "batch_monitor.h"
#include "faults.h"
#include "history.h"
#include "holder_sampler.h"
#include "nodes.h"
#include "starvation_watch.h"
#include "worker.h"

extern char** environ;

namespace dlock::chaos {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Worker {
  pid_t pid = -1;
  std::thread reader;
};

class Recorder {
 public:
  explicit Recorder(const std::string& path) : out_(path) {}
  void line(const std::string& s) {
    std::lock_guard lock(mu_);
    out_ << s << "\n";
    if (s.find("\"paused\":true") != std::string::npos) ++paused_seen_;
    ++lines_;
  }
  std::size_t lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  bool good() const { return out_.good(); }
  void flush() {
    std::lock_guard lock(mu_);
    out_.flush();
  }

 private:
  std::mutex mu_;
  std::ofstream out_;
  std::size_t lines_ = 0;
  std::size_t paused_seen_ = 0;
};

pid_t spawn(const std::string& binary, const std::vector<std::string>& args,
            const std::vector<std::string>& extra_env, int out_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = extra_env;
  std::vector<char*> envp;
  // An extra variable replaces the inherited one (getenv takes the first of a name).
  auto overridden = [&env_storage](std::string_view inherited) {
    for (const auto& e : env_storage) {
      const auto name = std::string_view(e).substr(0, e.find('=') + 1);
      if (inherited.substr(0, name.size()) == name) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!overridden(*e)) envp.push_back(*e);
  }
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) {
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

std::string find_libfaketime() {
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                        "/usr/lib/faketime/libfaketime.so.1"}) {
    if (access(p, R_OK) == 0) return p;
  }
  return {};
}

// The worker processes, each with a thread that records what it prints.
class Workers {
 public:
  Workers(const RunOptions& o, ChaosNodes& nodes, Recorder& recorder)
      : o_(o), nodes_(nodes), recorder_(recorder), faketime_(find_libfaketime()) {}
  ~Workers() { stop(); }
  // Starts them all; false (after a message) if one cannot start.
  bool start();
  void stop();
  std::vector<pid_t> pids() const;
  std::vector<bool> nesting() const;
  std::vector<bool> permit_holders() const;
  std::vector<bool> async() const;
  bool has_faketime() const { return !faketime_.empty(); }

 private:
  std::vector<std::string> args_for(int i);
  int total() const { return o_.workers + o_.async_workers; }

  const RunOptions& o_;
  ChaosNodes& nodes_;
  Recorder& recorder_;
  const std::string faketime_;
  std::vector<Worker> workers_;
};

// Workers [0, skewed) run with a slow clock, the next `nesting` nest leases, the next `readers`
// take the read lock, the next `permit_holders` take permits of a semaphore, the rest are plain;
// then come the `async_workers` async workers.
std::vector<std::string> Workers::args_for(int i) {
  const auto spellings = spellings_for(o_.naming, o_.reply_faults, i, nodes_.size());
  std::vector<std::string> args{"/proc/self/exe",
                                "--worker",
                                std::to_string(i + 1),
                                "--worker-nodes",
                                nodes_.urls_for(i, spellings),
                                "--resource",
                                nodes_.resource_url(),
                                "--ttl",
                                std::to_string(o_.ttl.count()) + "ms",
                                "--wait",
                                std::to_string(o_.wait.count()) + "ms"};
  if (i >= o_.workers) {
    // The solo node as this worker spells it (through its proxy if it has one there).
    const std::string all = args[4];
    std::size_t at = 0;
    for (std::size_t n = 0; n < solo_node(o_); ++n) at = all.find(',', at) + 1;
    args.insert(args.end(), {"--async-worker", std::to_string(o_.inflight), "--solo-node",
                             all.substr(at, all.find(',', at) - at)});
  } else if (i < o_.skewed && !faketime_.empty()) {
    args.emplace_back("--skewed-worker");
  } else if (i >= o_.skewed && i < o_.skewed + o_.nesting) {
    args.insert(args.end(), {"--nesting-worker", "--worker-seed", std::to_string(o_.seed)});
  } else if (i >= o_.skewed + o_.nesting && i < o_.skewed + o_.nesting + o_.readers) {
    args.emplace_back("--reader-worker");
  } else if (const int first = o_.skewed + o_.nesting + o_.readers;
             i >= first && i < first + o_.permit_holders) {
    args.insert(args.end(), {"--permit-worker", std::to_string(o_.permits)});
  }
  return args;
}

bool Workers::start() {
  workers_.resize(static_cast<std::size_t>(total()));
  for (int i = 0; i < total(); ++i) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    std::vector<std::string> env;
    if (i < o_.skewed && !faketime_.empty()) {
      env = {"LD_PRELOAD=" + faketime_, "FAKETIME=+0 x" + std::to_string(o_.skew_rate),
             "FAKETIME_NO_CACHE=1"};
    }
    std::string binary = "/proc/self/exe";
    if (!o_.mixed_binary.empty() && i % 2 == 1) {
      // The older version's library beside its binary, not this one's.
      binary = o_.mixed_binary;
      const auto slash = binary.rfind('/');
      env.push_back("LD_LIBRARY_PATH=" +
                    (slash == std::string::npos ? std::string(".") : binary.substr(0, slash)));
    }
    auto& w = workers_[static_cast<std::size_t>(i)];
    try {
      w.pid = spawn(binary, args_for(i), env, fds[1]);
    } catch (const std::exception& e) {
      std::cerr << "dlock_chaos: " << e.what() << "\n";
    }
    close(fds[1]);
    w.reader = std::thread([fd = fds[0], this] {
      FILE* in = fdopen(fd, "r");
      char line[4096];
      while (in != nullptr && std::fgets(line, sizeof line, in) != nullptr) {
        std::string l(line);
        while (!l.empty() && l.back() == '\n') l.pop_back();
        if (!l.empty()) recorder_.line(l);
      }
      if (in != nullptr) std::fclose(in);
    });
    if (w.pid < 0) return false;
  }
  return true;
}

void Workers::stop() {
  for (auto& w : workers_) {
    if (w.pid <= 0) continue;
    kill(w.pid, SIGTERM);
    kill(w.pid, SIGCONT);
  }
  const auto stop_by = Clock::now() + std::chrono::seconds(20);
  for (auto& w : workers_) {
    int status = 0;
    while (w.pid > 0 && waitpid(w.pid, &status, WNOHANG) == 0) {
      if (Clock::now() > stop_by) {
        std::cerr << "dlock_chaos: worker " << w.pid << " did not stop; killing it\n";
        kill(w.pid, SIGKILL);
        waitpid(w.pid, &status, 0);
        break;
      }
      kill(w.pid, SIGCONT);  // in case it stopped itself between SIGTERM and its check
      std::this_thread::sleep_for(milliseconds(20));
    }
    w.pid = -1;
    if (w.reader.joinable()) w.reader.join();
  }
}

std::vector<pid_t> Workers::pids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) out.push_back(w.pid);
  return out;
}

std::vector<bool> Workers::nesting() const {
  std::vector<bool> out;
  for (int i = 0; i < total(); ++i) out.push_back(i >= o_.skewed && i < o_.skewed + o_.nesting);
  return out;
}

std::vector<bool> Workers::permit_holders() const {
  std::vector<bool> out;
  const int first = o_.skewed + o_.nesting + o_.readers;
  for (int i = 0; i < total(); ++i) out.push_back(i >= first && i < first + o_.permit_holders);
  return out;
}

std::vector<bool> Workers::async() const {
  std::vector<bool> out;
  for (int i = 0; i < total(); ++i) out.push_back(i >= o_.workers);
  return out;
}

// What the batch monitor saw: the evidence that group commit ran (batch_monitor.h).
void print_batches(const std::vector<BatchMonitor::Counts>& counts, std::size_t solo) {
  BatchMonitor::Counts sum;
  std::string per_node;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const auto& c = counts[i];
    sum.acquire_batches += c.acquire_batches;
    sum.acquire_items += c.acquire_items;
    sum.release_batches += c.release_batches;
    sum.release_items += c.release_items;
    sum.largest = std::max(sum.largest, c.largest);
    sum.evalsha += c.evalsha;
    per_node += " node-" + std::to_string(i + 1) + (i == solo ? " (solo)" : "") + "=" +
                std::to_string(c.acquire_batches) + "/" + std::to_string(c.release_batches);
  }
  std::cout << "group commit (MONITOR of the lock nodes, a lower bound): acquire_batch.lua "
            << sum.acquire_batches << " calls for " << sum.acquire_items
            << " acquisitions, release_batch.lua " << sum.release_batches << " calls for "
            << sum.release_items << " releases, largest " << sum.largest << " items, of "
            << sum.evalsha << " EVALSHA in all; acquire/release batch calls by node:" << per_node
            << "\n";
}

void print_summary(const FaultSchedule& faults, const ChaosNodes& nodes, bool faketime) {
  std::cout << "faults injected:";
  for (const auto& [kind, n] : faults.counts()) std::cout << " " << kind << "=" << n;
  std::cout << (faketime ? "" : " (no libfaketime: no skewed worker)") << "\n";
  if (nodes.clustered()) {
    const auto& r = faults.redirects();
    std::cout << "reshards: the old masters replied ASK " << r.ask << ", TRYAGAIN " << r.tryagain
              << ", MOVED " << r.moved << " times\n";
  }
  if (!nodes.has_proxies()) return;
  const auto p = nodes.proxy_totals();
  std::cout << "proxies: " << p.connections << " connections, " << p.requests << " requests, "
            << p.replies << " replies delivered, " << p.dropped_replies << " dropped ("
            << p.lost_targeted << " aimed at one call), " << p.dropped_requests
            << " requests blackholed, " << p.cut << " connections cut\n";
}

// Only with async workers: nothing else batches, and MONITOR costs the nodes some CPU.
std::unique_ptr<BatchMonitor> batch_monitor(const RunOptions& o, ChaosNodes& nodes) {
  if (o.async_workers == 0) return nullptr;
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < nodes.size(); ++i) ports.push_back(nodes.node(i).port());
  return std::make_unique<BatchMonitor>(std::move(ports));
}

FaultTargets fault_targets(const RunOptions& o, ChaosNodes& nodes, const Workers& workers) {
  FaultTargets targets;
  targets.nodes = &nodes;
  targets.workers = workers.pids();
  targets.nesting = workers.nesting();
  targets.permit_holders = workers.permit_holders();
  targets.async = workers.async();
  if (o.async_workers > 0) targets.solo_node = solo_node(o);
  targets.skewed = o.skewed;
  targets.ttl = o.ttl;
  targets.max_ttl = o.nesting > 0 ? std::max(o.ttl, kNestingMaxTtl) : o.ttl;
  targets.wait = o.wait;
  return targets;
}

// Counter `name` of the resource (0 if never written), or nullopt if it did not answer. Read
// with a few tries, a pause between them: a failed read taken for 0 was a false "resource
// counter is 0 but 120 writes were accepted" with 32 tests at once on 2 cores.
std::optional<long> read_counter(FencedStore& store, const std::string& name) {
  for (int tries = 0; tries < 5; ++tries) {
    if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto v = store.read(name);
    if (v) return *v ? std::stol(**v) : 0;
    std::cerr << "dlock_chaos: reading " << name << ": " << v.error().message() << "\n";
  }
  return std::nullopt;
}

// The history's summary: the resources' final counters and the run's bounds. A counter the
// resource did not answer for is left unknown (-1 or absent: the checker skips it) and named
// in `unread`, which fails the run after the checker has run.
History final_summary(const RunOptions& o, const ChaosNodes& nodes, std::string& unread) {
  History summary;
  summary.counter = -1;
  ClientOptions patient;
  patient.node_timeout = std::chrono::seconds(5);
  patient.connect_timeout = std::chrono::seconds(5);
  auto store = FencedStore::connect(nodes.resource_url(), patient);
  if (!store) {
    unread = "every counter (" + store.error().message() + ")";
  } else {
    if (const auto counter = read_counter(*store, kName)) {
      summary.counter = *counter;
    } else {
      unread = kName;
    }
    // Each async name is a resource of its own: its counter is checked against its writes.
    for (const auto& name :
         o.async_workers > 0 ? async_names(o.inflight) : std::vector<std::string>{}) {
      if (const auto c = read_counter(*store, name)) {
        summary.counters[name] = *c;
      } else {
        unread += (unread.empty() ? "" : ", ") + name;
      }
    }
  }
  summary.ttl_ms = o.ttl.count();
  summary.wait_bound_ms = o.wait.count();
  summary.drift_ms = static_cast<std::int64_t>(static_cast<double>(o.ttl.count()) * 0.01) + 2;
  return summary;
}

}  // namespace

std::size_t solo_node(const RunOptions& o) {
  return static_cast<std::size_t>(o.workers) % o.nodes;
}

int run_chaos(const RunOptions& o) {
  const auto starting = Clock::now();
  auto started = o.cluster
                     ? ChaosNodes::start_clusters(o.nodes, o.cluster_replicas)
                     : ChaosNodes::start(o.nodes, /*second_loopback=*/o.naming == Naming::mixed);
  if (!started) {
    std::cerr << "dlock_chaos: " << started.error().message() << "\n";
    return 69;
  }
  ChaosNodes& nodes = **started;
  if (o.cluster) {
    std::cout << "lock nodes: " << o.nodes << " Redis Cluster(s) of " << ChaosNodes::kClusterMasters
              << " masters with " << o.cluster_replicas << " replica(s) each, ready in "
              << std::chrono::duration_cast<milliseconds>(Clock::now() - starting).count()
              << " ms\n";
  }
  Recorder recorder(o.history);
  if (!recorder.good()) {
    std::cerr << "dlock_chaos: cannot write " << o.history << "\n";
    return 64;
  }
  std::unique_ptr<BatchMonitor> monitor = batch_monitor(o, nodes);
  Workers workers(o, nodes, recorder);
  if (!workers.start()) return 69;
  FaultSchedule faults(fault_targets(o, nodes, workers), o.seed, o.reply_faults);
  // Straight to the servers (no proxy): what they hold, not what a faulty path shows.
  std::optional<StarvationWatch> starvation;
  starvation.emplace(workers.pids(), [&recorder](const std::string& line) { recorder.line(line); });
  std::optional<HolderSampler> sampler;
  sampler.emplace(nodes.urls_for(-1, std::vector<Spelling>(nodes.size(), Spelling::ip)), kName,
                  [&recorder](const std::string& line) { recorder.line(line); });
  const auto start = Clock::now();
  while (Clock::now() - start < o.duration) {
    std::this_thread::sleep_for(faults.pause());
    if (Clock::now() - start >= o.duration) break;
    if (auto f = faults.inject()) recorder.line(to_line(*f));
  }
  workers.stop();
  sampler.reset();
  starvation.reset();
  std::string unread;
  const History summary = final_summary(o, nodes, unread);
  recorder.line(summary_line(summary));
  recorder.flush();
  print_summary(faults, nodes, workers.has_faketime());
  if (monitor) {
    monitor->stop();
    print_batches(monitor->counts(), solo_node(o));
  }
  if (!unread.empty()) {
    std::cerr << "dlock_chaos: the resource " << nodes.resource_url()
              << " did not answer the final read of " << unread << "\n";
    return kResourceUnread;
  }
  return 0;
}

}  // namespace dlock::chaos

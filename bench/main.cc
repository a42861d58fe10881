// SPDX-License-Identifier: MIT
// dlock_bench: dlock side by side with the raw floor, the naive lock of seed 000, redis-py's
// Lock and node-redlock, on redis-server processes it starts itself, all in one run and with
// every client pinned the same way. `bash bench/run.sh` installs the peers and runs it; see
// docs/performance.md for what it measures and the latest numbers.
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "cluster_pair.h"
#include "cluster_workloads.h"
#include "contention.h"
#include "redis_process.h"
#include "report.h"
#include "stats.h"
#include "workloads.h"
#ifdef DLOCK_BENCH_SERVICE
#include "service_workloads.h"
#endif

extern char** environ;

namespace dlock::bench {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;

// "0", "0,1" or "0-1": the CPUs this thread (and the threads and processes it starts) may use.
void pin(const std::string& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::stringstream in(cpus);
  std::string part;
  while (std::getline(in, part, ',')) {
    const auto dash = part.find('-');
    const int lo = std::stoi(part.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) CPU_SET(c, &set);
  }
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    throw std::runtime_error("cannot pin to CPUs " + cpus + ": " + std::strerror(errno));
  }
}

// Starts argv with stdout into `out` (stderr stays ours); returns the pid.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& out) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

void wait_ok(pid_t pid, const std::string& what) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error(what + " failed");
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv to completion and returns its stdout.
std::string capture(const std::vector<std::string>& argv, const fs::path& scratch) {
  const fs::path out = scratch / "capture.out";
  wait_ok(spawn(argv, out), argv[0]);
  return slurp(out);
}

std::string first_line(std::string s) {
  return s.substr(0, s.find('\n'));
}

struct Setup {
  Ports one;   // node 0
  Ports five;  // all five
  fs::path scratch;
  std::string self;  // this executable
  std::string python;
  std::string node;
  fs::path peers;  // bench/peers
  bool with_peers = true;
};

// A peer script's JSON answer for one mode.
json run_peer(const Setup& s, const std::string& peer, const std::string& mode, const json& params,
              const fs::path& out) {
  std::vector<std::string> argv;
  if (peer == kRedisPy) {
    argv = {s.python, (s.peers / "redis_py_bench.py").string(), mode, params.dump()};
  } else {
    argv = {s.node, (s.peers / "redlock_bench.js").string(), mode, params.dump()};
  }
  wait_ok(spawn(argv, out), peer + " " + mode);
  return json::parse(slurp(out));
}

json ports_json(const Ports& p) {
  return json(std::vector<int>(p.begin(), p.end()));
}

std::vector<Acquisition> events_from(const json& j) {
  std::vector<Acquisition> out;
  for (const auto& e : j.at("events")) out.push_back({e[0], e[1], e[2]});
  return out;
}

// Eight (by default) workers in separate processes on one lock name, released together.
ContentionStats contention_run(const Setup& s, const std::string& impl, int workers, int count,
                               int hold_us, int retry_ms) {
  const std::string name = "bench:contended:" + std::to_string(monotonic_ns());
  const std::int64_t start_at = monotonic_ns() + 1'500'000'000;  // all started by then
  std::vector<std::pair<pid_t, fs::path>> children;
  for (int w = 0; w < workers; ++w) {
    const fs::path out = s.scratch / ("worker" + std::to_string(w) + ".json");
    std::vector<std::string> argv;
    if (impl == kRedisPy || impl == kRedlock) {
      const json params{{"ports", ports_json(s.one)},
                        {"name", name},
                        {"count", count},
                        {"hold_us", hold_us},
                        {"start_at_ns", start_at},
                        {"retry_ms", retry_ms}};
      argv = impl == kRedisPy
                 ? std::vector<std::string>{s.python, (s.peers / "redis_py_bench.py").string(),
                                            "contend", params.dump()}
                 : std::vector<std::string>{s.node, (s.peers / "redlock_bench.js").string(),
                                            "contend", params.dump()};
    } else {
      argv = {s.self,       "worker",
              "--impl",     impl == kNaive ? "naive" : impl == kDlock ? "dlock" : "dlock-fair",
              "--port",     std::to_string(s.one[0]),
              "--name",     name,
              "--count",    std::to_string(count),
              "--hold-us",  std::to_string(hold_us),
              "--start-at", std::to_string(start_at)};
    }
    children.emplace_back(spawn(argv, out), out);
  }
  std::vector<std::vector<Acquisition>> all;
  for (auto& [pid, out] : children) {
    wait_ok(pid, impl + " contention worker");
    all.push_back(events_from(json::parse(slurp(out))));
  }
  return analyze(all);
}

// Instructions this process executes per cycle, by callgrind: two fixed counts, so connecting
// and loading scripts cancel out.
double instructions_per_cycle(const Setup& s, const std::string& impl, int n1, int n2) {
  const auto total = [&](int n) {
    const fs::path out = s.scratch / "callgrind.out";
    std::vector<std::string> command{
        "valgrind", "--tool=callgrind", "--callgrind-out-file=" + out.string(),
        s.self,     "cycles",           "--impl",
        impl,       "--port",           std::to_string(s.one[0]),
        "--count",  std::to_string(n)};
    // Under valgrind (tens of times slower) the first greeting can take longer than the default
    // node timeout, as in bench/instructions.sh.
    if (impl.rfind("dlock", 0) == 0) command.insert(command.end(), {"--node-timeout", "10000"});
    capture(command, s.scratch);
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("summary:", 0) == 0 || line.rfind("totals:", 0) == 0) {
        return std::stod(line.substr(line.find(':') + 1));
      }
    }
    throw std::runtime_error("callgrind wrote no summary");
  };
  return (total(n2) - total(n1)) / (n2 - n1);
}

Impl impl_from(const std::string& s) {
  if (s == "raw") return Impl::raw;
  if (s == "naive") return Impl::naive;
  if (s == "dlock") return Impl::dlock;
  if (s == "dlock-fair") return Impl::dlock_fair;
  if (s == "dlock-noop-observer") return Impl::dlock_noop_observer;
  if (s == "dlock-prometheus") return Impl::dlock_prometheus;
  throw std::invalid_argument("unknown impl " + s);
}

int run_all(const std::string& out_dir, bool smoke, const std::string& client_cpus,
            const std::string& server_cpus, Setup s, bool callgrind, const std::string& command,
            const std::set<std::string>& sections, int workers) {
  const auto wanted = [&](const char* section) {
    return sections.empty() || sections.count(section) > 0;
  };
  Results r;
  r.smoke = smoke;
  r.command = command;
  r.placement = "redis-servers on CPU " + server_cpus +
                ", every client (dlock, peers, workers) on CPU " + client_cpus + " (of " +
                std::to_string(std::thread::hardware_concurrency()) + ")";

  char tmpl[] = "/tmp/dlock-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  s.scratch = tmpl;

  pin(server_cpus);
  std::vector<std::unique_ptr<sandbox::RedisProcess>> servers;
  for (int i = 0; i < 5; ++i) {
    fs::create_directories(s.scratch / ("node" + std::to_string(i)));
    servers.push_back(std::make_unique<sandbox::RedisProcess>(
        s.scratch / ("node" + std::to_string(i)), sandbox::RedisProcessOptions{}));
    if (auto st = servers.back()->start(); !st) throw std::runtime_error(st.error().message());
    s.five.push_back(servers.back()->port());
  }
  s.one = {s.five[0]};
  pin(client_cpus);

  r.versions = first_line(capture({sandbox::redis_server_binary(), "--version"}, s.scratch));
  if (s.with_peers) {
    r.versions +=
        "; redis-py " +
        first_line(capture({s.python, "-c", "import redis; print(redis.__version__)"}, s.scratch));
    const json v = run_peer(s, kRedlock, "versions", json::object(), s.scratch / "p.json");
    r.versions += "; node " + v.at("node").get<std::string>() + ", redlock " +
                  v.at("redlock").get<std::string>() + ", ioredis " +
                  v.at("ioredis").get<std::string>();
  }

  // The clusters of section 5d, pinned like the servers above. Forming them takes Redis 2-3 s
  // of waiting: a smoke run starts them now, so that CI does not wait for them (its numbers
  // mean nothing anyway); a real run starts them when the section comes, so that nothing else
  // is measured while they form.
  std::optional<ClusterPair> clusters;
  const auto start_clusters = [&] {
    clusters.emplace(s.scratch / "clusters", [&server_cpus] { pin(server_cpus); });
  };
  if (wanted("cluster") && smoke) start_clusters();

  const int cycles = smoke ? 50 : 4000;
  const int warmup = smoke ? 5 : 300;
  const auto say = [](const std::string& what) {
    std::cerr << "dlock_bench: " << what << std::endl;
  };

  // 1. Uncontended acquire + release.
  if (wanted("uncontended")) say("uncontended cycles");
  for (int nodes : {1, 5}) {
    if (!wanted("uncontended")) break;
    const Ports& p = nodes == 1 ? s.one : s.five;
    r.latency[kRaw][nodes] = summarize(latency(Impl::raw, p, cycles, warmup));
    if (nodes > 1) {
      r.latency[kRawAll][nodes] = summarize(latency(Impl::raw_acquire_all, p, cycles, warmup));
    }
    if (nodes == 1) r.latency[kNaive][1] = summarize(latency(Impl::naive, p, cycles, warmup));
    r.latency[kDlock][nodes] = summarize(latency(Impl::dlock, p, cycles, warmup));
    r.latency[kRawNew][nodes] = summarize(latency(Impl::raw, p, cycles, warmup, true));
    r.latency[kDlockNew][nodes] = summarize(latency(Impl::dlock, p, cycles, warmup, true));
    if (s.with_peers) {
      const json params{{"ports", ports_json(p)}, {"cycles", cycles}, {"warmup", warmup}};
      if (nodes == 1) {
        r.latency[kRedisPy][1] =
            summarize(run_peer(s, kRedisPy, "latency", params, s.scratch / "p.json")
                          .at("samples_ns")
                          .get<std::vector<std::int64_t>>());
      }
      r.latency[kRedlock][nodes] =
          summarize(run_peer(s, kRedlock, "latency", params, s.scratch / "p.json")
                        .at("samples_ns")
                        .get<std::vector<std::int64_t>>());
    }
  }

  // 2. Throughput with 1, 16 and 64 in flight, one node.
  const auto run_for = smoke ? 300ms : 3000ms;
  for (int k : {1, 16, 64}) {
    if (!wanted("throughput")) break;
    say("throughput: " + std::to_string(k) + " in flight");
    r.throughput[kRaw][k] = throughput(Impl::raw, s.one, k, run_for);
    r.throughput[kDlock][k] = throughput(Impl::dlock, s.one, k, run_for);
    if (s.with_peers) {
      const json params{{"ports", ports_json(s.one)},
                        {"inflight", k},
                        {"seconds", std::chrono::duration<double>(run_for).count()}};
      for (const auto& peer : {kRedisPy, kRedlock}) {
        r.throughput[peer][k] =
            run_peer(s, peer, "throughput", params, s.scratch / "p.json").at("per_second");
      }
    }
  }

  // 2b. Many in flight from one thread: dlock's asio API, the raw floor pipelined on one
  // connection per node, node-redlock's promises; with the servers' CPU per cycle. The raw floor
  // and dlock run kAsyncRounds times (the same time in all), interleaved, and each keeps its
  // medians: the servers' CPU per cycle of a single run moves by several percent from run to run
  // on a busy 2-core machine, and issue 32's targets compare two such numbers.
  const auto async_for = smoke ? 300ms : 2000ms;
  constexpr int kAsyncRounds = 3;
  const auto round_for = async_for / kAsyncRounds;
  for (int nodes : {1, 5}) {
    for (int k : {1, 16, 64, 256}) {
      if (!wanted("async")) break;
      say("in flight: " + std::to_string(k) + " on " + std::to_string(nodes) + " node(s)");
      const Ports& p = nodes == 1 ? s.one : s.five;
      // One run: cycles per second and the servers' µs per cycle.
      const auto run_once = [&](const std::function<double()>& run,
                                std::chrono::milliseconds length) {
        const double cpu0 = server_cpu_seconds(p);
        const double per_s = run();
        const double cpu1 = server_cpu_seconds(p);
        return std::pair{
            per_s, (cpu1 - cpu0) * 1e6 / (per_s * std::chrono::duration<double>(length).count())};
      };
      const auto keep = [&](const std::string& impl, std::vector<double> per_s,
                            std::vector<double> us) {
        r.in_flight[impl][nodes][k] = median(std::move(per_s));
        r.server_us[impl][nodes][k] = median(std::move(us));
      };
      std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> rounds;
      for (int i = 0; i < kAsyncRounds; ++i) {
        for (const auto& [impl, which] : {std::pair{kRaw, Impl::raw}, {kDlockAsync, Impl::dlock}}) {
          const auto [per_s, us] =
              run_once([&] { return async_throughput(which, p, k, round_for); }, round_for);
          rounds[impl].first.push_back(per_s);
          rounds[impl].second.push_back(us);
        }
      }
      for (auto& [impl, runs] : rounds) keep(impl, std::move(runs.first), std::move(runs.second));
      if (s.with_peers) {
        const json params{{"ports", ports_json(p)},
                          {"inflight", k},
                          {"seconds", std::chrono::duration<double>(async_for).count()}};
        const auto [per_s, us] = run_once(
            [&] {
              return run_peer(s, kRedlock, "throughput", params, s.scratch / "p.json")
                  .at("per_second")
                  .get<double>();
            },
            async_for);
        keep(kRedlock, {per_s}, {us});
      }
    }
  }

  // 3. Contention on one name.
  r.contention_workers = workers;
  r.contention_count = smoke ? 10 : 200;
  r.hold_us = 1000;
  r.retry_ms = 20;
  std::vector<std::string> contenders{kNaive, kDlock, kDlockFair};
  if (s.with_peers) contenders.insert(contenders.begin() + 1, {kRedisPy, kRedlock});
  for (const auto& impl : contenders) {
    if (!wanted("contention")) break;
    say("contention: " + impl);
    r.contention[impl] =
        contention_run(s, impl, r.contention_workers, r.contention_count, r.hold_us, r.retry_ms);
  }

  // 4. Watchdog cost and 5. Redis memory per lock.
  r.watchdog_locks = smoke ? 500 : 10000;
  r.watchdog_ttl_ms = 3000;
  if (wanted("watchdog")) {
    say("watchdog");
    r.watchdog =
        watchdog_cost(s.one, r.watchdog_locks, std::chrono::milliseconds(r.watchdog_ttl_ms),
                      smoke ? 2000ms : 10000ms);
  }
  if (wanted("memory")) {
    say("memory");
    const int mem_locks = smoke ? 500 : 10000;
    r.memory_per_lock[kRaw] = memory_per_lock(Impl::raw, s.one, mem_locks);
    r.memory_per_lock[kDlock] = memory_per_lock(Impl::dlock, s.one, mem_locks);
    r.memory_names = mem_locks;
    r.memory_per_name[kRaw] = memory_per_name(Impl::raw, s.one, mem_locks, 300ms);
    r.memory_per_name[kDlock] = memory_per_name(Impl::dlock, s.one, mem_locks, 300ms);
  }

  // 5b. What an observer costs: dlock without one, with a no-op one, with PrometheusObserver,
  // in interleaved rounds on one node so that the machine's drift hits all three alike.
  if (wanted("observer")) {
    say("observer cost");
    const std::vector<std::pair<std::string, Impl>> variants{
        {kObserverUnset, Impl::dlock},
        {kObserverNoop, Impl::dlock_noop_observer},
        {kObserverPrometheus, Impl::dlock_prometheus}};
    std::map<std::string, std::vector<std::int64_t>> samples;
    const int rounds = 5;
    for (int round = 0; round < rounds; ++round) {
      for (const auto& [key, impl] : variants) {
        auto got = latency(impl, s.one, cycles / rounds, warmup / rounds);
        samples[key].insert(samples[key].end(), got.begin(), got.end());
      }
    }
    for (auto& [key, v] : samples) r.latency[key][1] = summarize(std::move(v));
    if (callgrind) {
      const int n1 = smoke ? 20 : 200;
      const int n2 = smoke ? 60 : 1200;
      r.instructions[kObserverUnset] = instructions_per_cycle(s, "dlock", n1, n2);
      r.instructions[kObserverNoop] = instructions_per_cycle(s, "dlock-noop-observer", n1, n2);
      r.instructions[kObserverPrometheus] = instructions_per_cycle(s, "dlock-prometheus", n1, n2);
    }
  }

  // 5c. Shared and counted locks against the mutex one would use without them: threads of one
  // client on one name, each section held a while; sections per second.
  if (wanted("shared")) {
    r.mixed_threads = 8;
    r.mixed_hold_us = 2000;
    r.mixed_read_share = 0.9;
    const auto hold = std::chrono::microseconds(r.mixed_hold_us);
    const auto mixed_for = smoke ? 300ms : 3000ms;
    for (int nodes : {1, 5}) {
      say("shared: " + std::to_string(nodes) + " node(s)");
      const Ports& p = nodes == 1 ? s.one : s.five;
      r.mixed[kMixedMutex][nodes] =
          mixed_sections(MixedLock::exclusive, p, r.mixed_threads, 0, hold, mixed_for);
      r.mixed[kMixedShared][nodes] = mixed_sections(MixedLock::shared, p, r.mixed_threads,
                                                    r.mixed_read_share, hold, mixed_for);
      r.mixed[kMixedSemaphore][nodes] =
          mixed_sections(MixedLock::semaphore, p, r.mixed_threads, 0, hold, mixed_for);
    }
  }

  // 5d. Redis Cluster as a lock node: 1 and 3 masters.
  if (wanted("cluster")) {
    say("cluster: 1 and 3 masters");
    if (!clusters) start_clusters();
    r.cluster = measure_clusters(clusters->one(), clusters->three(), smoke, say);
    clusters.reset();
  }

  // 5e. Through the service: `dlock serve` in front of node 0, placed like the redis-servers.
#ifdef DLOCK_BENCH_SERVICE
  if (wanted("service")) {
    pin(server_cpus);
    ServiceUnderTest service(DLOCK_BENCH_SERVICE,
                             {"redis://127.0.0.1:" + std::to_string(s.one[0])});
    pin(client_cpus);
    r.service = measure_service(s.one, service, smoke, say);
  }
#endif

  // 6. Instructions per cycle in the client.
  if (callgrind && wanted("callgrind")) {
    say("callgrind");
    const int n1 = smoke ? 20 : 200;
    const int n2 = smoke ? 60 : 1200;
    r.instructions[kRaw] = instructions_per_cycle(s, "raw", n1, n2);
    r.instructions[kDlock] = instructions_per_cycle(s, "dlock", n1, n2);
  }

  servers.clear();
  const std::string notes = slurp(s.peers.parent_path() / "notes.md");
  write_report(r, out_dir, notes);
  fs::remove_all(s.scratch);
  say("wrote " + (fs::path(out_dir) / "performance.md").string());
  return 0;
}

}  // namespace
}  // namespace dlock::bench

int main(int argc, char** argv) {
  using namespace dlock::bench;
  CLI::App app{"dlock_bench: dlock against the raw floor and the locks users pick instead"};
  app.require_subcommand(0, 1);
  std::string out_dir = "docs";
  bool smoke = false;
  bool no_callgrind = false;
  std::string client_cpus = "0";
  std::string server_cpus = "0";
  Setup setup;
  setup.python = "/usr/bin/python3";
  setup.node = "node";
  setup.peers = DLOCK_BENCH_PEERS_DIR;
  bool no_peers = false;
  std::vector<std::string> sections;
  int workers = 8;
  app.add_option("--out", out_dir, "Folder for performance.md, .csv and .png")
      ->capture_default_str();
  app.add_flag("--smoke", smoke, "A few iterations of everything: checks that it works");
  app.add_option("--client-cpus", client_cpus, "CPUs for every client")->capture_default_str();
  app.add_option("--server-cpus", server_cpus, "CPUs for the redis-servers")->capture_default_str();
  app.add_flag("--no-peers", no_peers, "Skip redis-py and node-redlock");
  app.add_flag("--no-callgrind", no_callgrind, "Skip the instruction counts");
  app.add_option(
         "--only", sections,
         "Run only these sections: uncontended throughput async contention watchdog memory shared "
         "observer cluster service callgrind (the report then has gaps)")
      ->delimiter(',');
  app.add_option("--workers", workers, "Processes contending for one name")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  app.add_option("--python", setup.python, "Python with redis-py")->capture_default_str();
  app.add_option("--node", setup.node, "Node.js; NODE_PATH must reach redlock and ioredis")
      ->capture_default_str();

  // Internal: one contention worker, and a fixed number of cycles for callgrind.
  std::string impl;
  int port = 0;
  std::string name;
  int count = 0;
  int hold_us = 1000;
  std::int64_t start_at = 0;
  auto* worker = app.add_subcommand("worker", "One contention worker (internal)");
  auto* cycles = app.add_subcommand("cycles", "A fixed number of uncontended cycles (internal)");
  for (auto* sub : {worker, cycles}) {
    sub->add_option("--impl", impl)->required();
    sub->add_option("--port", port)->required();
    sub->add_option("--count", count)->required();
  }
  int inflight = 0;
  int nodes = 1;
  bool new_names = false;
  cycles->add_flag("--new-names", new_names,
                   "Without --inflight: a name never used before per cycle");
  bool async_api = false;
  cycles
      ->add_option("--nodes", nodes,
                   "Lock nodes: the servers on ports --port, --port + 1, ... (default 1)")
      ->check(CLI::Range(1, 9));
  int node_timeout_ms = 0;
  cycles->add_option("--node-timeout", node_timeout_ms,
                     "ClientOptions::node_timeout in ms (default: the library's); for valgrind");
  cycles->add_option("--inflight", inflight, "Run throughput for 3 s with this many in flight");
  // For profiling the asio API's client side: `valgrind --tool=callgrind dlock_bench cycles
  // --impl dlock --port P --count 0 --inflight 64 --async` (bench/notes.md).
  cycles->add_flag("--async", async_api,
                   "With --inflight: the asio API (one thread), not a thread per lock; prints "
                   "cycles per second and the cycles run. Without: --count cycles through the "
                   "asio API, one in flight");
  worker->add_option("--name", name)->required();
  worker->add_option("--hold-us", hold_us);
  worker->add_option("--start-at", start_at);
  CLI11_PARSE(app, argc, argv);

  try {
    Ports ports;
    for (int i = 0; i < nodes; ++i) ports.push_back(static_cast<std::uint16_t>(port + i));
    if (worker->parsed()) {
      nlohmann::json events = nlohmann::json::array();
      for (const auto& a : contend(impl_from(impl), ports, name, count, hold_us, start_at)) {
        events.push_back({a.start, a.acquired, a.released});
      }
      std::cout << nlohmann::json{{"events", events}}.dump() << "\n";
      return 0;
    }
    if (cycles->parsed()) {
      if (node_timeout_ms > 0) set_node_timeout(std::chrono::milliseconds(node_timeout_ms));
      if (inflight > 0 && async_api) {
        const auto run = std::chrono::seconds(3);
        const double per_s = async_throughput(impl_from(impl), ports, inflight, run);
        std::cout << per_s << " per second, " << per_s * 3 << " cycles\n";
      } else if (async_api) {
        async_cycles(ports, count);
      } else if (inflight > 0) {
        std::cout << throughput(impl_from(impl), ports, inflight, std::chrono::seconds(3)) << "\n";
      } else {
        latency(impl_from(impl), ports, count, 0, new_names);
      }
      return 0;
    }
    setup.self = std::filesystem::read_symlink("/proc/self/exe").string();
    setup.with_peers = !no_peers;
    std::string command = "dlock_bench";
    for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
    return run_all(out_dir, smoke, client_cpus, server_cpus, setup, !no_callgrind, command,
                   std::set<std::string>(sections.begin(), sections.end()), workers);
  } catch (const std::exception& e) {
    std::cerr << "dlock_bench: " << e.what() << "\n";
    return 1;
  }
}

// SPDX-License-Identifier: MIT
// `dlock demo`: a 5-node sandbox, worker processes that increment a shared counter under the
// lock with fencing, and faults injected on a schedule; then a summary with the numbers.
//
// Each worker is this same binary (`dlock demo-worker`, hidden) and reports one line per
// critical section on its stdout; the demo reads them and checks the history: no two accepted
// writes overlapped, the counter equals the accepted writes, and the one late write of a
// paused holder was refused by the fencing check.
#include "demo_command.h"

#include <dlock/dlock.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "connect_flags.h"
#include "duration.h"
#include "exit_codes.h"
#include "sandbox.h"

extern char** environ;

namespace dlock::cli {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kLockName = "demo:counter";

std::int64_t now_ns() {
  // steady_clock is CLOCK_MONOTONIC on Linux: comparable across the demo's processes.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// ---- the worker ------------------------------------------------------------------------------

std::atomic<bool> g_stop{false};
std::atomic<bool> g_pause{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void on_signal(int sig) {
  if (sig == SIGUSR1) {
    g_pause = true;
  } else {
    g_stop = true;
  }
}

// ---- the demo --------------------------------------------------------------------------------

struct Cycle {
  int worker = 0;
  std::int64_t wait_ns = 0;      // started waiting
  std::int64_t acquired_ns = 0;  // had the lock
  std::int64_t released_ns = 0;  // wrote and was about to release
  std::uint64_t token = 0;
  int written = 0;  // 1 accepted, 0 refused (stale token), -1 error
  bool paused = false;
};

// What the workers reported, gathered by one reader thread per worker.
class History {
 public:
  void add(const Cycle& c) {
    std::lock_guard lock(mu_);
    cycles_.push_back(c);
    last_token_ = std::max(last_token_, c.token);
  }
  void paused(std::uint64_t token) {
    std::lock_guard lock(mu_);
    paused_token_ = token;
  }
  void error() { ++errors_; }
  std::size_t size() {
    std::lock_guard lock(mu_);
    return cycles_.size();
  }
  std::uint64_t last_token() {
    std::lock_guard lock(mu_);
    return last_token_;
  }
  std::uint64_t paused_token() {
    std::lock_guard lock(mu_);
    return paused_token_;
  }
  std::vector<Cycle> cycles() {
    std::lock_guard lock(mu_);
    return cycles_;
  }
  int errors() const { return errors_.load(); }

 private:
  std::mutex mu_;
  std::vector<Cycle> cycles_;
  std::uint64_t last_token_ = 0;
  std::uint64_t paused_token_ = 0;
  std::atomic<int> errors_{0};
};

struct Worker {
  pid_t pid = -1;
  std::thread reader;
};

void read_worker(int fd, History& history) {
  FILE* in = fdopen(fd, "r");
  char line[512];
  while (in != nullptr && std::fgets(line, sizeof line, in) != nullptr) {
    Cycle c;
    int paused = 0;
    std::uint64_t token = 0;
    if (std::sscanf(line, "CYCLE %d %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNu64 " %d %d",
                    &c.worker, &c.wait_ns, &c.acquired_ns, &c.released_ns, &c.token, &c.written,
                    &paused) == 7) {
      c.paused = paused != 0;
      history.add(c);
    } else if (std::sscanf(line, "PAUSE %" SCNu64, &token) == 1) {
      history.paused(token);
    } else if (std::strncmp(line, "ERR", 3) == 0) {
      history.error();
    }
  }
  if (in != nullptr) std::fclose(in);
}

pid_t spawn_worker(int id, const std::string& ttl, const std::string& resource,
                   const std::string& nodes, int out_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  std::vector<std::string> args{"/proc/self/exe", "demo-worker", "--id",       std::to_string(id),
                                "--ttl",          ttl,           "--resource", resource};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage{"DLOCK_REDIS=" + nodes};
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DLOCK_", 6) != 0) envp.push_back(*e);
  }
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data()) != 0) {
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

double ms_of(std::int64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto at = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

std::string fixed(double v, int digits = 1) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

struct FaultNote {
  double at_s;
  std::string what;
  std::string effect;
};

// ---- workers: one process each, and a thread reading its reports -----------------------------

// SIGTERM to every worker (SIGCONT first: one may still be paused), SIGKILL after 10 s; then
// the readers have read everything.
void stop_workers(std::vector<Worker>& workers) {
  for (auto& w : workers) {
    if (w.pid > 0) {
      kill(w.pid, SIGCONT);
      kill(w.pid, SIGTERM);
    }
  }
  const auto stop_by = Clock::now() + std::chrono::seconds(10);
  for (auto& w : workers) {
    if (w.pid <= 0) continue;
    int status = 0;
    while (waitpid(w.pid, &status, WNOHANG) == 0) {
      if (Clock::now() > stop_by) {
        kill(w.pid, SIGKILL);
        waitpid(w.pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  for (auto& w : workers) {
    if (w.reader.joinable()) w.reader.join();
  }
}

// Empty if the workers could not be started.
std::vector<Worker> start_workers(const DemoFlags& flags, const std::string& resource,
                                  const std::string& lock_nodes, History& history) {
  std::vector<Worker> workers(static_cast<std::size_t>(flags.workers));
  for (int i = 0; i < flags.workers; ++i) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      stop_workers(workers);
      return {};
    }
    auto& w = workers[static_cast<std::size_t>(i)];
    w.pid = spawn_worker(i + 1, flags.ttl, resource, lock_nodes, fds[1]);
    close(fds[1]);
    w.reader = std::thread(read_worker, fds[0], std::ref(history));
  }
  return workers;
}

// ---- faults: injected on a schedule while the workers run -------------------------------------

class Faults {
 public:
  Faults(sandbox::Sandbox& nodes, Client& client, History& history,
         const std::vector<Worker>& workers, milliseconds ttl)
      : nodes_(nodes), client_(client), history_(history), workers_(workers), ttl_(ttl) {}

  // Injects the next fault once its share of the run (`t` of `total_s` seconds) has come.
  void at(double t, double total_s) {
    if (step_ == 0 && t >= 0.2 * total_s) {
      kill_two(t);
    } else if (step_ == 1 && t >= 0.4 * total_s) {
      pause_holder(t);
    } else if (step_ == 2 && t >= 0.6 * total_s) {
      restart_empty(3, t, " (until every lock it may have lost has expired)");
    } else if (step_ == 3 && t >= 0.75 * total_s) {
      restart_empty(4, t, "");
    } else {
      return;
    }
    ++step_;
  }
  std::vector<FaultNote>& notes() { return notes_; }

 private:
  void kill_two(double t) {
    nodes_.node(3).kill9();
    nodes_.node(4).kill9();
    at_kill_ = history_.size();
    std::cout << "  fault: kill -9 nodes 4 and 5 (quorum 3 of 5 still reachable)" << std::endl;
    notes_.push_back({t, "kill -9 nodes 4, 5", ""});
  }

  // Pauses a holder between its read and its write, for twice the ttl.
  void pause_holder(double t) {
    notes_[0].effect =
        std::to_string(history_.size() - at_kill_) + " acquisitions so far with 2 of 5 nodes down";
    const pid_t victim = workers_[0].pid;
    kill(victim, SIGUSR1);
    const auto asked = Clock::now();
    while (history_.paused_token() == 0 && Clock::now() - asked < std::chrono::seconds(5)) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    const std::uint64_t token = history_.paused_token();
    const auto before = history_.size();
    std::this_thread::sleep_for(ttl_ * 2);
    const auto during = history_.size() - before;
    kill(victim, SIGCONT);
    std::cout << "  fault: worker 1 stopped (SIGSTOP) for " << (ttl_ * 2).count()
              << " ms while holding the lock with token " << token << "; others took it " << during
              << " times meanwhile" << std::endl;
    notes_.push_back(
        {t, "pause worker 1 past its ttl (SIGSTOP " + std::to_string((ttl_ * 2).count()) + " ms)",
         std::to_string(during) + " acquisitions by others during the pause"});
  }

  void restart_empty(std::size_t i, double t, const char* why) {
    (void)nodes_.node(i).restart(/*keep_data=*/false);
    const std::int64_t q = quarantine_of(i);
    const std::string node = "node " + std::to_string(i + 1);
    std::cout << "  fault: " << node << " restarted empty; kept out of quorums for " << q << " ms"
              << why << std::endl;
    notes_.push_back({t, "restart " + node + " empty",
                      "kept out of quorums for " + std::to_string(q) + " ms, then votes again"});
  }

  // How long node i is kept out of quorums, as soon as the client has greeted its new process.
  std::int64_t quarantine_of(std::size_t i) {
    std::int64_t q = 0;
    const auto until = Clock::now() + std::chrono::seconds(2);
    while (q == 0 && Clock::now() < until) {
      auto status = client_.status(kLockName);
      if (status && !status->nodes[i].error) q = status->nodes[i].quarantine.count();
      if (q == 0) std::this_thread::sleep_for(milliseconds(20));
    }
    return q;
  }

  sandbox::Sandbox& nodes_;
  Client& client_;
  History& history_;
  const std::vector<Worker>& workers_;
  const milliseconds ttl_;
  int step_ = 0;
  std::size_t at_kill_ = 0;
  std::vector<FaultNote> notes_;
};

// Runs the workers for `total_s` seconds with the faults, and a progress line every second.
void run_schedule(sandbox::Sandbox& nodes, History& history, Faults& faults, double total_s,
                  Clock::time_point start) {
  auto seconds_since_start = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  double next_progress = 1.0;
  while (seconds_since_start() < total_s) {
    const double t = seconds_since_start();
    if (t >= next_progress) {
      std::size_t up = 0;
      for (std::size_t i = 0; i < 5; ++i) up += nodes.node(i).running() ? 1 : 0;
      std::cout << "[" << std::setw(5) << fixed(t) << "s] " << std::setw(6) << history.size()
                << " acquisitions, last token " << history.last_token() << ", lock nodes up " << up
                << "/5" << std::endl;
      next_progress = static_cast<double>(static_cast<int>(t)) + 1.0;
    }
    faults.at(t, total_s);
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// ---- history: what the workers reported, checked --------------------------------------------

struct Verdict {
  std::size_t acquisitions = 0;
  std::size_t accepted = 0;
  std::size_t refused = 0;
  std::size_t violations = 0;
  long counter = 0;
  std::vector<double> handoffs;  // ms from a release to a waiting worker's acquisition
  std::vector<double> waits;     // ms each worker waited
  bool paused_write_refused = false;
};

// No two accepted critical sections overlap, and the counter equals the accepted writes.
Verdict check_history(std::vector<Cycle> cycles, long counter) {
  std::sort(cycles.begin(), cycles.end(),
            [](const Cycle& a, const Cycle& b) { return a.acquired_ns < b.acquired_ns; });
  Verdict v;
  v.acquisitions = cycles.size();
  v.counter = counter;
  const Cycle* previous_accepted = nullptr;
  for (std::size_t k = 0; k < cycles.size(); ++k) {
    const Cycle& c = cycles[k];
    v.waits.push_back(ms_of(c.acquired_ns - c.wait_ns));
    if (k > 0 && c.wait_ns < cycles[k - 1].released_ns &&
        c.acquired_ns >= cycles[k - 1].released_ns) {
      v.handoffs.push_back(ms_of(c.acquired_ns - cycles[k - 1].released_ns));
    }
    v.paused_write_refused = v.paused_write_refused || (c.paused && c.written == 0);
    if (c.written == 1) {
      ++v.accepted;
      if (previous_accepted != nullptr && c.acquired_ns < previous_accepted->released_ns) {
        ++v.violations;
      }
      previous_accepted = &c;
    } else if (c.written == 0) {
      ++v.refused;
    }
  }
  if (counter != static_cast<long>(v.accepted)) ++v.violations;  // a lost or doubled update
  return v;
}

// ---- report -----------------------------------------------------------------------------------

void print_summary(const Verdict& v, int workers, double secs, int errors) {
  std::cout << "\n+----------------------------------------------------------------------+\n";
  std::cout << "| dlock demo summary                                                   |\n";
  std::cout << "+----------------------------------------------------------------------+\n";
  auto row = [](const std::string& k, const std::string& value) {
    std::cout << "  " << std::left << std::setw(26) << k << value << "\n";
  };
  row("acquisitions", std::to_string(v.acquisitions) + " in " + fixed(secs) + " s (" +
                          std::to_string(workers) + " workers)");
  row("hand-off p50 / p99",
      fixed(percentile(v.handoffs, 0.5), 2) + " ms / " + fixed(percentile(v.handoffs, 0.99), 2) +
          " ms (" + std::to_string(v.handoffs.size()) + " hand-offs to a waiting worker)");
  row("wait p50 / p99 / max", fixed(percentile(v.waits, 0.5)) + " / " +
                                  fixed(percentile(v.waits, 0.99)) + " / " +
                                  fixed(percentile(v.waits, 1.0)) + " ms");
  row("accepted writes", std::to_string(v.accepted));
  row("counter", std::to_string(v.counter) + (v.counter == static_cast<long>(v.accepted)
                                                  ? " (= accepted writes: no lost update)"
                                                  : " (MISMATCH)"));
  row("late writes refused", std::to_string(v.refused) + " (by the fencing check)");
  row("lock errors", std::to_string(errors) + " (waits that ended without the lock)");
  row("VIOLATIONS", std::to_string(v.violations));
}

int print_report(const Verdict& v, std::vector<FaultNote> notes, std::uint64_t paused_token,
                 int workers, double secs, int errors) {
  if (notes.size() > 1) {
    notes[1].effect += v.paused_write_refused
                           ? "; its late write (token " + std::to_string(paused_token) +
                                 ") was refused by the fencing check"
                           : "; its write was not refused";
  }
  print_summary(v, workers, secs, errors);
  std::cout << "  faults:\n";
  for (const auto& n : notes) {
    std::cout << "    t=" << std::right << std::setw(5) << fixed(n.at_s) << "s  " << n.what << "\n"
              << "              -> " << n.effect << "\n";
  }
  std::cout << (v.violations == 0
                    ? "OK: mutual exclusion held; the paused holder's write was fenced off\n"
                    : "FAIL: violations found\n");
  return v.violations == 0 ? kExitOk : 1;
}

}  // namespace

CLI::App* add_demo_worker_command(CLI::App& app, DemoWorkerFlags& flags) {
  CLI::App* worker = app.add_subcommand("demo-worker", "one worker process of `dlock demo`");
  worker->group("");  // hidden from --help
  worker->add_option("--resource", flags.resource)->required();
  worker->add_option("--ttl", flags.ttl);
  worker->add_option("--id", flags.id);
  return worker;
}

int demo_worker_command(const DemoWorkerFlags& flags) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) sigaction(sig, &sa, nullptr);
  auto ttl = parse_duration(flags.ttl);
  ConnectFlags connect;
  connect.node_timeout = "100ms";
  auto client = make_client(connect);
  auto store = FencedStore::connect(flags.resource);
  if (!ttl || !client || !store) {
    std::printf("ERR setup failed\n");
    return kExitUsage;
  }
  LockOptions options;
  options.ttl = *ttl;
  options.retry_delay = milliseconds(20);
  while (!g_stop) {
    const std::int64_t wait_ns = now_ns();
    auto lease = client->lock(kLockName, std::chrono::seconds(5), options);
    if (!lease) {
      std::printf("ERR %s\n", lease.error().message().c_str());
      std::fflush(stdout);
      continue;
    }
    const std::int64_t acquired_ns = now_ns();
    const std::uint64_t token = lease->fencing_token().value();
    // Read-modify-write of the shared counter: without the lock, updates would be lost. The
    // read registers our token, so no older holder's write is accepted after it.
    auto read = store->read(kLockName, lease->fencing_token());
    const long value = read && read->accepted && read->value ? std::stol(*read->value) : 0;
    bool paused = false;
    if (g_pause.exchange(false)) {
      // A "GC pause": the whole process stops between its read and its write, longer than
      // the ttl, so the watchdog cannot renew either. The demo resumes us.
      std::printf("PAUSE %" PRIu64 "\n", token);
      std::fflush(stdout);
      raise(SIGSTOP);
      paused = true;
    }
    std::this_thread::sleep_for(milliseconds(1));  // the work of the critical section
    auto written = store->write(kLockName, std::to_string(value + 1), lease->fencing_token());
    const std::int64_t released_ns = now_ns();
    (void)lease->unlock();
    std::printf("CYCLE %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRIu64 " %d %d\n", flags.id,
                wait_ns, acquired_ns, released_ns, token, written ? (*written ? 1 : 0) : -1,
                paused ? 1 : 0);
    std::fflush(stdout);
  }
  return kExitOk;
}

CLI::App* add_demo_command(CLI::App& app, DemoFlags& flags) {
  CLI::App* demo = app.add_subcommand(
      "demo", "See dlock work: 5 local nodes, worker processes, faults, and a summary");
  demo->add_option("-w,--workers", flags.workers, "worker processes (default 8)");
  demo->add_option("-d,--duration", flags.duration, "how long the workers run (default 20s)");
  demo->add_option("-t,--ttl", flags.ttl, "lock ttl (default 1s)");
  demo->footer(
      "Starts a 5-node sandbox and a separate resource node holding a counter. Workers take "
      "the lock, read the counter, and write it back +1 through a fencing check. Midway it "
      "kills 2 nodes, pauses one holder past its ttl (its late write must be refused), and "
      "restarts nodes empty (they must be kept out of quorums). Then it checks the history.\n"
      "Exit status: 0 when there was no violation, 1 otherwise, 69 if redis-server is missing.\n\n"
      "Example:\n"
      "  dlock demo\n"
      "  dlock demo --workers 4 --duration 10s");
  return demo;
}

int demo_command(const DemoFlags& flags) {
  auto duration = parse_duration(flags.duration);
  auto ttl = parse_duration(flags.ttl);
  if (!duration || !ttl || flags.workers < 2 || flags.workers > 64 || ttl->count() < 100 ||
      *duration < std::chrono::seconds(4)) {
    std::cerr << "dlock: demo needs 2-64 workers, a ttl of at least 100ms and a duration of at "
                 "least 4s\n";
    return kExitUsage;
  }
  signal(SIGPIPE, SIG_IGN);
  std::cout << "dlock demo: 5 lock nodes, " << flags.workers << " worker processes, ttl "
            << flags.ttl << ", " << flags.duration << "\n";
  auto sandbox = sandbox::Sandbox::start(6, 0, false);  // nodes 1-5 lock, node 6 holds the counter
  if (!sandbox) {
    std::cerr << "dlock: " << sandbox.error().message() << "\n";
    return kExitUnavailable;
  }
  sandbox::Sandbox& nodes = **sandbox;
  const std::string resource = nodes.node(5).url();
  ClientOptions options;
  for (std::size_t i = 0; i < 5; ++i) options.nodes.push_back(nodes.node(i).url());
  options.node_timeout = milliseconds(100);
  std::string lock_nodes;
  for (const auto& url : options.nodes) lock_nodes += (lock_nodes.empty() ? "" : ",") + url;
  std::cout << "lock nodes: " << lock_nodes << "\nresource:   " << resource << "\n\n";
  auto client = Client::create(options);
  auto store = FencedStore::connect(resource);
  if (!client || !store) {
    std::cerr << "dlock: demo set-up failed\n";
    return kExitUnavailable;
  }
  (void)client->status(kLockName);  // greets the nodes: they now know each other's identity

  History history;
  std::vector<Worker> workers = start_workers(flags, resource, lock_nodes, history);
  if (workers.empty()) return kExitUnavailable;
  Faults faults(nodes, *client, history, workers, *ttl);
  const auto start = Clock::now();
  run_schedule(nodes, history, faults, std::chrono::duration<double>(*duration).count(), start);
  stop_workers(workers);

  auto final_value = store->read(kLockName);
  const long counter = final_value && *final_value ? std::stol(**final_value) : 0;
  const Verdict verdict = check_history(history.cycles(), counter);
  return print_report(verdict, faults.notes(), history.paused_token(), flags.workers,
                      std::chrono::duration<double>(Clock::now() - start).count(),
                      history.errors());
}

}  // namespace dlock::cli

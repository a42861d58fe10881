// SPDX-License-Identifier: MIT
// dlock_chaos: Jepsen-style runner. M worker processes run critical sections on a fenced
// counter under one lock, against N real redis-server processes, while the controller injects
// faults on a seeded schedule; every critical section is appended to a history file, which the
// checker (history.h) then judges.
//
//   dlock_chaos --duration 60s --history /tmp/h.jsonl      # run, then check
//   dlock_chaos --check /tmp/h.jsonl                        # check a history only
//
// Faults: kill -9 of a node, restarted empty or from its append-only file; SIGSTOP/SIGCONT of
// a node; SIGSTOP of a holder between its read and its write, past its ttl; a worker whose
// clock runs at another rate (libfaketime), holding on an explicit lease. One fault is injected
// at a time, but a restarted node then sits out of quorums for one max ttl, which can overlap
// the next fault: for short stretches two nodes, now and then three, cannot vote, and the lock
// is unavailable until one returns (safe, not live; the checker allows it inside fault windows).
#include <dlock/dlock.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "duration.h"
#include "history.h"
#include "sandbox.h"

extern char** environ;

namespace dlock::chaos {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kName = "chaos:counter";

// CLOCK_MONOTONIC by raw syscall: libfaketime in a skewed worker does not intercept it, so all
// processes' timestamps stay comparable.
std::int64_t real_now_ns() {
  timespec ts{};
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::atomic<bool> g_stop{false};
std::atomic<bool> g_pause{false};

void on_signal(int sig) {
  if (sig == SIGUSR1) {
    g_pause = true;
  } else if (sig == SIGUSR2) {
    g_pause = false;  // the controller gave up waiting for this pause
  } else {
    g_stop = true;
  }
}

struct WorkerOptions {
  std::string nodes;
  std::string resource;
  int id = 0;
  milliseconds ttl{500};
  milliseconds wait{10000};
  bool skewed = false;  // runs under libfaketime: explicit lease, long hold, checks validity
};

// The skewed worker's wait. libfaketime fakes clock_gettime(CLOCK_MONOTONIC) but not
// pthread_cond_clockwait, so a timed condition-variable wait (Client::lock's sleep between
// attempts) gets a deadline the kernel reads as decades away, and only a release message ends
// it: the worker stalled for good at its first wait that needed its timeout. nanosleep is
// faked, so this loop of try_lock and sleeps keeps the worker running on its slow clock.
Result<Lease> poll_for_lock(Client& client, milliseconds wait, const LockOptions& options) {
  const auto until = Clock::now() + wait;  // by the worker's own clock
  for (;;) {
    auto lease = client.try_lock(kName, options);
    if (lease || g_stop) return lease;
    const auto& e = lease.error();
    if (!e.is(errc::lock_held) && !e.is(errc::quorum_not_reached) && !e.is(errc::timeout)) {
      return lease;
    }
    if (Clock::now() >= until) {
      if (e.is(errc::lock_held)) return Error(errc::wait_timeout, e.message());
      return lease;
    }
    std::this_thread::sleep_for(options.retry_delay);
  }
}

int run_worker(const WorkerOptions& w) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaction(sig, &sa, nullptr);
  ClientOptions options;
  for (std::size_t at = 0, end; at <= w.nodes.size(); at = end + 1) {
    end = w.nodes.find(',', at);
    if (end == std::string::npos) end = w.nodes.size();
    options.nodes.push_back(w.nodes.substr(at, end - at));
  }
  options.node_timeout = milliseconds(100);
  auto client = Client::create(options);
  auto store = FencedStore::connect(w.resource);
  if (!client || !store) return 2;
  LockOptions lock_options;
  lock_options.ttl = w.ttl;
  lock_options.auto_renew = !w.skewed;
  lock_options.retry_delay = milliseconds(20);
  const std::string holder = "worker-" + std::to_string(w.id);
  unsigned cycles = 0;
  while (!g_stop) {
    Event e;
    e.name = kName;
    e.holder = holder;
    e.skewed = w.skewed;
    e.wait_ns = real_now_ns();
    auto lease = w.skewed ? poll_for_lock(*client, w.wait, lock_options)
                          : client->lock(kName, w.wait, lock_options);
    if (!lease) {
      e.outcome = lease.error().is(errc::wait_timeout) ? "timeout" : "error";
      e.acquire_ns = e.valid_until_ns = e.release_ns = real_now_ns();
      std::puts(to_line(e).c_str());
      std::fflush(stdout);
      continue;
    }
    e.acquire_ns = real_now_ns();
    e.valid_until_ns = e.acquire_ns + lease->validity().count() * 1'000'000;
    e.token = lease->fencing_token().value();
    // A fenced read: the resource now refuses every older holder's write.
    auto read = store->read(kName, lease->fencing_token());
    e.read_ns = real_now_ns();
    if (!read || !read->accepted) {
      e.outcome = !read ? "error" : "refused";
      e.release_ns = real_now_ns();
      (void)lease->unlock();
      std::puts(to_line(e).c_str());
      std::fflush(stdout);
      continue;
    }
    const long value = read->value ? std::stol(*read->value) : 0;
    if (g_pause.exchange(false) && !g_stop) {
      e.paused = true;
      raise(SIGSTOP);  // a GC pause between the read and the write; the controller resumes us
    }
    // Every few cycles a skewed worker holds for most of its lease by its own clock, and writes
    // only if its clock says the lease still holds: a careful client with a wrong clock.
    const bool long_hold = w.skewed && ++cycles % 20 == 0;
    std::this_thread::sleep_for(long_hold ? w.ttl * 6 / 10 : milliseconds(1));
    if (long_hold && !lease->is_held()) {
      (void)lease->unlock();
      continue;
    }
    auto written = store->write(kName, std::to_string(value + 1), lease->fencing_token());
    e.release_ns = real_now_ns();
    e.outcome = !written ? "error" : (*written ? "accepted" : "refused");
    (void)lease->unlock();
    std::puts(to_line(e).c_str());
    std::fflush(stdout);
  }
  return 0;
}

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

pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
            int out_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = extra_env;
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data()) != 0) {
    pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

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

std::string find_libfaketime() {
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                        "/usr/lib/faketime/libfaketime.so.1"}) {
    if (access(p, R_OK) == 0) return p;
  }
  return {};
}

struct RunOptions {
  std::size_t nodes = 5;
  int workers = 6;
  milliseconds duration{60000};
  milliseconds ttl{500};
  milliseconds wait{10000};
  std::string history = "chaos-history.jsonl";
  unsigned seed = 1;
  int skewed = 1;
  double skew_rate = 0.5;
};

int run_chaos(const RunOptions& o) {
  // AOF with fsync every second: a node restarted from it may miss its last second of writes,
  // as in production; it is kept out of quorums like any restarted node.
  auto sandbox = cli::Sandbox::start(o.nodes + 1, 0, /*persist=*/true, /*fsync_always=*/false);
  if (!sandbox) {
    std::cerr << "dlock_chaos: " << sandbox.error().message() << "\n";
    return 69;
  }
  cli::Sandbox& s = **sandbox;
  std::string nodes;
  for (std::size_t i = 0; i < o.nodes; ++i) nodes += (i ? "," : "") + s.node(i).url();
  const std::string resource = s.node(o.nodes).url();
  Recorder recorder(o.history);
  if (!recorder.good()) {
    std::cerr << "dlock_chaos: cannot write " << o.history << "\n";
    return 64;
  }
  const std::string faketime = find_libfaketime();
  std::vector<Worker> workers(static_cast<std::size_t>(o.workers));
  for (int i = 0; i < o.workers; ++i) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return 69;
    const bool skewed = i < o.skewed && !faketime.empty();
    std::vector<std::string> env;
    if (skewed) {
      env = {"LD_PRELOAD=" + faketime, "FAKETIME=+0 x" + std::to_string(o.skew_rate),
             "FAKETIME_NO_CACHE=1"};
    }
    auto& w = workers[static_cast<std::size_t>(i)];
    std::vector<std::string> args{"/proc/self/exe",
                                  "--worker",
                                  std::to_string(i + 1),
                                  "--worker-nodes",
                                  nodes,
                                  "--resource",
                                  resource,
                                  "--ttl",
                                  std::to_string(o.ttl.count()) + "ms",
                                  "--wait",
                                  std::to_string(o.wait.count()) + "ms"};
    if (skewed) args.emplace_back("--skewed-worker");
    w.pid = spawn(args, env, fds[1]);
    close(fds[1]);
    w.reader = std::thread([fd = fds[0], &recorder] {
      FILE* in = fdopen(fd, "r");
      char line[2048];
      while (in != nullptr && std::fgets(line, sizeof line, in) != nullptr) {
        std::string l(line);
        while (!l.empty() && l.back() == '\n') l.pop_back();
        if (!l.empty()) recorder.line(l);
      }
      if (in != nullptr) std::fclose(in);
    });
  }

  std::mt19937 rng(o.seed);
  const auto start = Clock::now();
  std::map<std::string, std::size_t> fault_counts;
  std::size_t next_worker = 1;  // the holder to pause next (worker 0 may be skewed)
  while (Clock::now() - start < o.duration) {
    std::this_thread::sleep_for(milliseconds(300 + rng() % 700));
    if (Clock::now() - start >= o.duration) break;
    Fault f;
    f.start_ns = real_now_ns();
    const auto kind = rng() % 5;
    const std::size_t node = rng() % o.nodes;
    f.target = "node-" + std::to_string(node + 1);
    if (kind == 0 || kind == 1) {
      f.kind = kind == 0 ? "restart-empty" : "restart-aof";
      s.node(node).kill9();
      std::this_thread::sleep_for(milliseconds(200 + rng() % 800));
      (void)s.node(node).restart(/*keep_data=*/kind == 1);
    } else if (kind == 2) {
      f.kind = "kill";
      s.node(node).kill9();
      std::this_thread::sleep_for(milliseconds(500 + rng() % 1500));
      (void)s.node(node).restart(/*keep_data=*/true);
    } else if (kind == 3) {
      f.kind = "stop-node";
      s.node(node).pause();
      std::this_thread::sleep_for(milliseconds(200 + rng() % 1300));
      s.node(node).resume();
    } else {
      f.kind = "pause-holder";
      const std::size_t w = next_worker++ % workers.size();
      if (w < static_cast<std::size_t>(o.skewed)) continue;
      f.target = "worker-" + std::to_string(w + 1);
      // It stops itself at its next critical section, which may be a whole wait away; the
      // pause is timed from the moment it stopped, so the history shows when it really ran.
      const pid_t pid = workers[w].pid;
      kill(pid, SIGUSR1);
      if (!wait_until_stopped(pid, o.wait + milliseconds(2000))) {
        kill(pid, SIGUSR2);  // withdrawn: a pause that began later would have no SIGCONT
        if (!wait_until_stopped(pid, milliseconds(200))) continue;
      }
      f.start_ns = real_now_ns();
      std::this_thread::sleep_for(o.ttl * 3);
      kill(pid, SIGCONT);
    }
    // Its effect lasts until the node votes again (a restarted node: one max ttl later).
    f.end_ns = real_now_ns() + (o.ttl.count() + 1000) * 1'000'000;
    recorder.line(to_line(f));
    ++fault_counts[f.kind];
  }
  for (auto& w : workers) {
    kill(w.pid, SIGTERM);
    kill(w.pid, SIGCONT);
  }
  const auto stop_by = Clock::now() + std::chrono::seconds(20);
  for (auto& w : workers) {
    int status = 0;
    while (waitpid(w.pid, &status, WNOHANG) == 0) {
      if (Clock::now() > stop_by) {
        std::cerr << "dlock_chaos: worker " << w.pid << " did not stop; killing it\n";
        kill(w.pid, SIGKILL);
        waitpid(w.pid, &status, 0);
        break;
      }
      kill(w.pid, SIGCONT);  // in case it stopped itself between SIGTERM and its check
      std::this_thread::sleep_for(milliseconds(20));
    }
    w.reader.join();
  }
  auto store = FencedStore::connect(resource);
  History summary;
  summary.counter = -1;
  if (store) {
    auto v = store->read(kName);
    summary.counter = v && *v ? std::stol(**v) : 0;
  }
  summary.ttl_ms = o.ttl.count();
  summary.wait_bound_ms = o.wait.count();
  summary.drift_ms = static_cast<std::int64_t>(static_cast<double>(o.ttl.count()) * 0.01) + 2;
  recorder.line(summary_line(summary));
  recorder.flush();
  std::cout << "faults injected:";
  for (const auto& [kind, n] : fault_counts) std::cout << " " << kind << "=" << n;
  std::cout << (faketime.empty() ? " (no libfaketime: no skewed worker)" : "") << "\n";
  return 0;
}

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
            << h.faults.size() << " faults\n"
            << "late writes of paused or skewed holders: " << r.expected_overlaps
            << ", refused by fencing: " << r.caught_by_fencing
            << ", accepted before the next holder touched the resource (harmless): "
            << r.harmless_late_writes << "\n"
            << "violations: " << r.violations.size() << "\n";
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
  int worker_id = 0;
  app.add_option("--nodes", run.nodes, "lock nodes (default 5)");
  app.add_option("--workers", run.workers, "worker processes (default 6)");
  app.add_option("--duration", duration, "how long to inject faults (default 60s)");
  app.add_option("--ttl", ttl, "lock ttl (default 500ms)");
  app.add_option("--wait", wait, "a worker's wait bound (default 10s)");
  app.add_option("--history", run.history, "history file (JSON lines)");
  app.add_option("--seed", run.seed, "fault schedule seed");
  app.add_option("--skewed", run.skewed, "workers with a slow clock (libfaketime; default 1)");
  app.add_option("--skew-rate", run.skew_rate, "their clock rate (default 0.5)");
  app.add_option("--check", check_only, "only check this history file");
  app.add_option("--worker", worker_id)->group("");
  app.add_option("--worker-nodes", worker.nodes)->group("");
  app.add_option("--resource", worker.resource)->group("");
  app.add_flag("--skewed-worker", worker.skewed)->group("");
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
  if (const int rc = run_chaos(run); rc != 0) return rc;
  return print_check(run.history);
}

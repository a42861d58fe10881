// SPDX-License-Identifier: MIT
#include "runner.h"

#include <dlock/dlock.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "history.h"
#include "sandbox.h"
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

}  // namespace

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

}  // namespace dlock::chaos

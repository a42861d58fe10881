// SPDX-License-Identifier: MIT
#include "run_command.h"

#include <dlock/semaphore.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "duration.h"
#include "exit_codes.h"
#include "exit_status.h"
#include "stop_signals.h"

extern char** environ;

namespace dlock::cli {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The running command, for the signal handler: SIGINT/SIGTERM/SIGHUP sent to dlock go to the
// command, so the lock is released only once the command has exited. A second SIGINT kills it.
// Lock-free atomics are safe to use in a signal handler.
std::atomic<pid_t> g_child{0};
std::atomic<int> g_interrupts{0};
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

std::atomic<int> g_pending{0};  // a signal that came before the child's pid was known

void send_to_child(pid_t child, int sig) {
  if (sig == SIGINT && ++g_interrupts > 1) {
    kill(child, SIGKILL);
  } else {
    kill(child, sig);
  }
}

// Whoever sees both the pid and the pending signal sends it, exactly once.
void flush_pending() {
  const pid_t child = g_child.load();
  if (child <= 0) return;
  if (const int sig = g_pending.exchange(0); sig != 0) send_to_child(child, sig);
}

void forward_signal(int sig) {
  const pid_t child = g_child.load();
  if (child > 0) {
    send_to_child(child, sig);
    return;
  }
  g_pending.store(sig);
  flush_pending();  // the pid may have been stored meanwhile
}

void install_forwarding() {
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : kStopSignals) sigaction(sig, &sa, nullptr);
}

// What the main thread waits for: the command's exit (seen by a thread blocked in waitpid) or
// the loss of the lock (reported by the client's watchdog thread).
class Events {
 public:
  void child_exited(int status) {
    std::lock_guard lock(mu_);
    status_ = status;
    cv_.notify_all();
  }
  void lock_lost(const Error& e) {
    std::lock_guard lock(mu_);
    if (!lost_) lost_ = e;
    cv_.notify_all();
  }
  // Waits for either; returns false if `until` passed first.
  bool wait_until(Clock::time_point until) {
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, until, [this] { return status_ || lost_; });
  }
  // Waits for the command's exit alone: once the lock is lost, wait_until() no longer waits.
  bool wait_exit_until(Clock::time_point until) {
    std::unique_lock lock(mu_);
    return cv_.wait_until(lock, until, [this] { return status_.has_value(); });
  }
  std::optional<int> status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  std::optional<Error> lost() {
    std::lock_guard lock(mu_);
    return lost_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<int> status_;  // guarded by mu_
  std::optional<Error> lost_;  // guarded by mu_
};

// Reaps the child on its own thread and reports to Events. The stop signals are the main
// thread's alone: the reaper is born with them blocked (a new thread inherits the mask of the
// thread that creates it, here a StopSignals scope's), so there is no moment at which one lands
// on it. One that did would wait in waitpid() for the command it was meant for: under
// ThreadSanitizer, whose handlers run at the thread's next libc call, it was never forwarded.
// The stop signals are the only ones `dlock run` handles (any other keeps its default action,
// the same on every thread); the library's own threads block every asynchronous signal.
class ChildWatch {
 public:
  ChildWatch(pid_t pid, std::shared_ptr<Events> events) : thread_(start(pid, std::move(events))) {}
  ~ChildWatch() { thread_.join(); }
  ChildWatch(const ChildWatch&) = delete;
  ChildWatch& operator=(const ChildWatch&) = delete;

 private:
  static std::thread start(pid_t pid, std::shared_ptr<Events> events) {
    const StopSignals blocked_until_started;  // a stop signal meanwhile is taken after, by main
    return std::thread([pid, events = std::move(events)] {
      int status = 0;
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      events->child_exited(status);
    });
  }

  std::thread thread_;
};

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunFlags& flags) {
  CLI::App* run =
      app.add_subcommand("run", "Hold a lock while COMMAND runs (renewing it), then release it");
  add_connect_flags(*run, flags.connect);
  run->add_option("-t,--ttl", flags.ttl,
                  "lock ttl; renewed every ttl/3 while COMMAND runs (default 30s)")
      ->envname("DLOCK_TTL");
  run->add_option("-w,--wait", flags.wait,
                  "how long to wait for a lock held by someone else (default 0: try once)")
      ->envname("DLOCK_WAIT");
  run->add_option("--kill-after", flags.kill_after,
                  "when the lock is lost: how long COMMAND has to exit after SIGTERM before it "
                  "gets SIGKILL (default 10s; 0: SIGKILL at once)");
  run->add_option("-E,--conflict-exit-code", flags.conflict_exit_code,
                  "exit status when the lock is held by someone else past --wait (default 75)")
      ->check(CLI::Range(0, 255));
  run->add_flag("--fair", flags.fair,
                "wait in a FIFO queue: the longest waiter gets the lock next (default: unordered)");
  add_replica_flags(*run, flags.replicas);
  run->add_flag("-s,--shared", flags.shared,
                "take the lock for reading: any number of --shared runs hold it at once, and none "
                "while a plain run (a writer) holds it; a waiting writer keeps new readers out");
  run->add_option("-n,--permits", flags.permits,
                  "take one of N permits of the semaphore NAME (at most N runs at once); the "
                  "permit is the lock DLOCK_NAME names")
      ->check(CLI::Range(1, 1024));
  run->add_option("-c,--command", flags.shell_command,
                  "run this command line with /bin/sh -c (instead of COMMAND after '--')");
  run->add_option("name", flags.name, "lock name")->required();
  run->footer(
      "COMMAND and its arguments follow a '--' (or one shell command line is given with -c).\n"
      "Exit status: COMMAND's own if the lock was held throughout; 75 (or -E's) if the lock was "
      "held by someone else past --wait; 69 if no quorum of nodes could be reached; 64 for a "
      "usage or "
      "configuration error; 76 if the lock was lost while COMMAND ran (COMMAND got SIGTERM, then "
      "SIGKILL if still running after --kill-after).\n"
      "COMMAND sees DLOCK_NAME, DLOCK_TOKEN (fencing token) and DLOCK_VALIDITY_MS.\n\n"
      "Examples:\n"
      "  dlock run -r redis://10.0.0.1:6379 nightly-report -- ./report.sh\n"
      "  DLOCK_REDIS=redis://a:6379,redis://b:6379,redis://c:6379 dlock run -t 10s -w 1m "
      "db-migrate "
      "-- make migrate\n"
      "  dlock run --kill-after 1m backup -- ./backup.sh\n"
      "  dlock run -E 0 -c 'pg_dump app > /backup/app.sql' nightly-dump   # skipped if running\n"
      "  dlock run --shared -w 5m catalog -- ./serve-from-catalog.sh   # readers, many at once\n"
      "  dlock run -w 5m catalog -- ./rebuild-catalog.sh                # the writer, alone\n"
      "  dlock run -n 4 -w 10m downloads -- ./fetch.sh                  # at most 4 at once");
  return run;
}

namespace {

// -c's command line becomes COMMAND; a usage error's exit status if COMMAND is missing or
// given twice.
std::optional<int> resolve_command(RunFlags& flags) {
  if (flags.shell_command) {
    if (!flags.command.empty()) {
      std::cerr << "dlock: run takes -c or a COMMAND after '--', not both\n";
      return kExitUsage;
    }
    if (flags.shell_command->empty()) {
      std::cerr << "dlock: -c needs a command line\n";
      return kExitUsage;
    }
    flags.command = {"/bin/sh", "-c", *flags.shell_command};
  }
  if (flags.command.empty()) {
    std::cerr << "dlock: run needs a COMMAND after '--' or -c (see dlock run --help)\n";
    return kExitUsage;
  }
  return std::nullopt;
}

// The lock's options, renewed by the client's watchdog every ttl/3 while the command runs,
// however long; a loss is reported to `events`. A usage error's exit status if the flags do
// not go together.
Result<LockOptions> lock_options(const RunFlags& flags, milliseconds ttl,
                                 const std::shared_ptr<Events>& events) {
  LockOptions options;
  options.ttl = ttl;
  options.auto_renew = true;
  options.fair = flags.fair;
  if (auto guard = apply_replica_flags(flags.replicas, options); !guard) {
    return std::move(guard).error();
  }
  options.on_lost = [events](const Error& e) { events->lock_lost(e); };
  if (flags.shared && flags.fair) {
    return Error(errc::invalid_argument,
                 "--fair orders writers only; it cannot be used with "
                 "--shared");
  }
  if (flags.permits > 0 && flags.shared) {
    return Error(errc::invalid_argument, "-n (a semaphore) cannot be used with --shared");
  }
  return options;
}

Result<Lease> acquire(Client& client, const RunFlags& flags, milliseconds wait,
                      const LockOptions& options) {
  if (flags.permits > 0) {
    return Semaphore(client, flags.name, flags.permits, options).acquire_lease(wait);
  }
  return flags.shared ? client.lock_shared(flags.name, wait, options)
                      : client.lock(flags.name, wait, options);
}

// Starts COMMAND with DLOCK_NAME, DLOCK_TOKEN and DLOCK_VALIDITY_MS in its environment, the
// signals sent to dlock forwarded to it.
struct Spawned {
  pid_t pid = 0;
  int error = 0;  // posix_spawn's error number; 0 if it started
};
Spawned spawn_command(std::vector<std::string> args, const Lease& lease) {
  std::vector<std::string> env_storage{
      "DLOCK_NAME=" + lease.name(), "DLOCK_TOKEN=" + std::to_string(lease.fencing_token().value()),
      "DLOCK_VALIDITY_MS=" + std::to_string(lease.validity().count())};
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DLOCK_NAME=", 11) != 0 && std::strncmp(*e, "DLOCK_TOKEN=", 12) != 0 &&
        std::strncmp(*e, "DLOCK_VALIDITY_MS=", 18) != 0) {
      envp.push_back(*e);
    }
  }
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  install_forwarding();
  // A signal that arrives before the child's pid is known is kept and sent right after.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Spawned{0, rc};
  g_child = pid;
  flush_pending();
  return Spawned{pid, 0};
}

// Waits for the command's exit. A lost lock first gets it SIGTERM, then SIGKILL after
// `kill_after`.
void supervise(pid_t pid, Events& events, milliseconds kill_after, const std::string& name) {
  while (!events.wait_until(Clock::now() + std::chrono::seconds(1))) {
  }
  if (auto lost = events.lost(); lost && !events.status()) {
    std::cerr << "dlock: lost lock '" << name << "': " << lost->message()
              << "; sending SIGTERM to the command (SIGKILL in " << kill_after.count() << " ms)\n";
    kill(pid, SIGTERM);
    // The grace lets COMMAND run its clean-up; only its exit ends it early.
    if (!events.wait_exit_until(Clock::now() + kill_after)) {
      std::cerr << "dlock: the command is still running " << kill_after.count()
                << " ms after SIGTERM; sending SIGKILL\n";
      kill(pid, SIGKILL);
    }
  }
  while (!events.status()) events.wait_until(Clock::now() + std::chrono::seconds(1));
  g_child = 0;
}

// Releases the lock; the command's exit status if the lock was held throughout.
int finish(Lease& lease, Events& events, const std::string& name) {
  const int status = *events.status();
  const bool held = lease.is_held();
  auto released = lease.unlock();
  if (events.lost()) return kExitLockLost;
  if (!held || (!released && released.error().is(errc::lock_lost))) {
    std::cerr << "dlock: lock '" << name
              << "' expired before the command finished; it was not held throughout\n";
    return kExitLockLost;
  }
  if (!released) std::cerr << "dlock: warning: " << released.error().message() << "\n";
  return exit_status_of(status);
}

}  // namespace

int run_command(const RunFlags& given) {
  RunFlags flags = given;
  if (auto usage = resolve_command(flags)) return *usage;
  auto ttl = parse_duration(flags.ttl);
  auto wait = parse_duration(flags.wait);
  auto kill_after = parse_duration(flags.kill_after);
  for (const auto* d : {&ttl, &wait, &kill_after}) {
    if (!*d) {
      std::cerr << "dlock: " << d->error().message() << "\n";
      return kExitUsage;
    }
  }
  auto client = make_client(flags.connect);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  auto events = std::make_shared<Events>();
  auto options = lock_options(flags, *ttl, events);
  if (!options) {
    std::cerr << "dlock: " << options.error().message() << "\n";
    return kExitUsage;
  }
  auto lease = acquire(*client, flags, *wait, *options);
  if (!lease) {
    std::cerr << "dlock: " << lease.error().message() << "\n";
    return exit_for(lease.error(), flags.conflict_exit_code);
  }
  const Spawned spawned = spawn_command(flags.command, *lease);
  if (spawned.error != 0) {
    std::cerr << "dlock: cannot run '" << flags.command[0] << "': " << std::strerror(spawned.error)
              << "\n";
    (void)lease->unlock();
    return spawned.error == ENOENT ? kExitNotFound : kExitCannotExec;
  }
  ChildWatch child(spawned.pid, events);
  supervise(spawned.pid, *events, *kill_after, flags.name);
  return finish(*lease, *events, flags.name);
}

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
#include "worker.h"

#include <dlock/dlock.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "history.h"

namespace dlock::chaos {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

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

}  // namespace

std::int64_t real_now_ns() {
  timespec ts{};
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool stop_requested() {
  return g_stop;
}

bool take_pause_request() {
  return g_pause.exchange(false) && !g_stop;
}

std::string why(const Error& error) {
  // Short enough for one history line (the controller reads lines of up to 4 KiB).
  std::string m = error.message();
  if (m.size() > 1000) m.resize(1000);
  return m;
}

void emit(const Event& e) {
  std::puts(to_line(e).c_str());
  std::fflush(stdout);
}

void emit_not_acquired(Event& e, const Error& error) {
  e.outcome = error.is(errc::wait_timeout) ? "timeout" : "error";
  e.acquire_ns = e.valid_until_ns = e.release_ns = real_now_ns();
  e.detail = why(error);
  emit(e);
}

void record_acquired(Event& e, const Lease& lease) {
  e.acquire_ns = real_now_ns();
  e.valid_until_ns = e.acquire_ns + lease.validity().count() * 1'000'000;
  e.token = lease.fencing_token().value();
  e.owner = lease.owner().str();
}

ClientOptions worker_client_options(const std::string& nodes) {
  ClientOptions options;
  for (std::size_t at = 0, end; at <= nodes.size(); at = end + 1) {
    end = nodes.find(',', at);
    if (end == std::string::npos) end = nodes.size();
    options.nodes.push_back(nodes.substr(at, end - at));
  }
  options.node_timeout = milliseconds(100);
  return options;
}

namespace {

// A worker's lock options: its ttl, retried every 20 ms.
LockOptions cycle_options(const WorkerOptions& w) {
  LockOptions o;
  o.ttl = w.ttl;
  o.retry_delay = milliseconds(20);
  return o;
}

// If the controller asked for a pause: a GC pause here (SIGSTOP); the controller resumes us.
void pause_if_asked(Event& e) {
  if (take_pause_request()) {
    e.paused = true;
    raise(SIGSTOP);
  }
}

// The plain and the skewed worker: lock, fenced read, +1, fenced write, unlock.
void run_plain_cycles(const WorkerOptions& w, Client& client, FencedStore& store) {
  LockOptions lock_options = cycle_options(w);
  lock_options.auto_renew = !w.skewed;
  const std::string holder = "worker-" + std::to_string(w.id);
  unsigned cycles = 0;
  while (!g_stop) {
    Event e;
    e.name = kName;
    e.holder = holder;
    e.skewed = w.skewed;
    e.owner = Client::default_owner().str();  // its leases' owner: named before any is had
    e.wait_ns = real_now_ns();
    auto lease = w.skewed ? poll_for_lock(client, w.wait, lock_options)
                          : client.lock(kName, w.wait, lock_options);
    if (!lease) {
      emit_not_acquired(e, lease.error());
      continue;
    }
    record_acquired(e, *lease);
    // A fenced read: the resource now refuses every older holder's write.
    auto read = store.read(kName, lease->fencing_token());
    e.read_ns = real_now_ns();
    if (!read || !read->accepted) {
      e.outcome = !read ? "error" : "refused";
      e.release_ns = real_now_ns();
      (void)lease->unlock();
      emit(e);
      continue;
    }
    const long value = read->value ? std::stol(*read->value) : 0;
    pause_if_asked(e);  // between the read and the write
    // Every few cycles a skewed worker holds for most of its lease by its own clock, and writes
    // only if its clock says the lease still holds: a careful client with a wrong clock.
    const bool long_hold = w.skewed && ++cycles % 20 == 0;
    std::this_thread::sleep_for(long_hold ? w.ttl * 6 / 10 : milliseconds(1));
    if (long_hold && !lease->is_held()) {
      (void)lease->unlock();
      continue;
    }
    e.write_ns = real_now_ns();
    auto written = store.write(kName, std::to_string(value + 1), lease->fencing_token());
    e.release_ns = real_now_ns();
    e.outcome = !written ? "error" : (*written ? "accepted" : "refused");
    (void)lease->unlock();
    emit(e);
  }
}

// The reader worker: read lock, fenced read, a short hold, unlock. Its windows may overlap
// other readers' but never a writer's (history.h, check (a)).
void run_reader_cycles(const WorkerOptions& w, Client& client, FencedStore& store) {
  const LockOptions lock_options = cycle_options(w);
  const std::string holder = "reader-" + std::to_string(w.id);
  unsigned cycles = 0;
  while (!g_stop) {
    Event e;
    e.name = kName;
    e.holder = holder;
    e.shared = true;
    e.owner = Client::default_owner().str();  // its leases' owner: named before any is had
    e.wait_ns = real_now_ns();
    auto lease = client.lock_shared(kName, w.wait, lock_options);
    if (!lease) {
      emit_not_acquired(e, lease.error());
      continue;
    }
    record_acquired(e, *lease);
    // A fenced read registers the reader's token: a writer from before it can no longer write.
    auto read = store.read(kName, lease->fencing_token());
    e.read_ns = real_now_ns();
    pause_if_asked(e);  // while reading
    // Readers hold a while, so that they overlap each other and a writer has to wait.
    std::this_thread::sleep_for(milliseconds(2 + ++cycles % 5));
    e.release_ns = real_now_ns();
    // It held the read lock whatever its read returned: its window counts either way. (A
    // recording read refuses a reader older than one that read before it: harmless here, see
    // docs/features.md, "Read-write lock".)
    e.outcome = "held";
    if (!read) e.detail = "fenced read: " + why(read.error());
    (void)lease->unlock();
    emit(e);
  }
}

// The permit holder: one permit of kSemaphore, a short hold, give it back. The holders' windows
// may overlap up to the permit count, a slot's never (history.h, checks (a) and (d)).
void run_permit_cycles(const WorkerOptions& w, Client& client) {
  Semaphore semaphore(client, kSemaphore, w.permits, cycle_options(w));
  const std::string holder = "permit-" + std::to_string(w.id);
  unsigned cycles = 0;
  while (!g_stop) {
    Event e;
    e.name = kSemaphore;
    e.holder = holder;
    e.permits = w.permits;
    e.owner = Client::default_owner().str();  // its leases' owner: named before any is had
    e.wait_ns = real_now_ns();
    auto permit = semaphore.acquire_lease(w.wait);
    if (!permit) {
      emit_not_acquired(e, permit.error());
      continue;
    }
    record_acquired(e, *permit);
    e.slot = permit->name();
    pause_if_asked(e);  // while holding a permit
    std::this_thread::sleep_for(milliseconds(2 + ++cycles % 5));
    e.release_ns = real_now_ns();
    e.outcome = "held";
    (void)permit->unlock();
    emit(e);
    // Between permits, a rest: the holders should outnumber the permits, not the cores.
    std::this_thread::sleep_for(milliseconds(15));
  }
}

}  // namespace

int run_worker(const WorkerOptions& w) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaction(sig, &sa, nullptr);
  if (w.inflight > 0) return run_async_worker(w);
  auto client = Client::create(worker_client_options(w.nodes));
  auto store = FencedStore::connect(w.resource);
  if (!client || !store) {
    std::fprintf(stderr, "dlock_chaos worker %d: %s\n", w.id,
                 (!client ? client.error() : store.error()).message().c_str());
    return 2;
  }
  if (w.nesting) {
    run_nesting_cycles(w, *client, *store);
  } else if (w.reader) {
    run_reader_cycles(w, *client, *store);
  } else if (w.permits > 0) {
    run_permit_cycles(w, *client);
  } else {
    run_plain_cycles(w, *client, *store);
  }
  return 0;
}

}  // namespace dlock::chaos

// SPDX-License-Identifier: MIT
#include "workloads.h"

#include <dlock/async.h>
#include <dlock/dlock.h>
#include <sys/resource.h>

#include <asio.hpp>
#include <atomic>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <stdexcept>
#include <thread>

#include "raw_client.h"
#include "stats.h"

namespace dlock::bench {
namespace {

using namespace std::chrono_literals;

// A token as long as the peers' (redis-py: uuid1().hex, 32 characters).
const std::string kToken = "0123456789abcdef0123456789abcdef";

bool is_dlock(Impl impl) {
  return impl == Impl::dlock || impl == Impl::dlock_fair || impl == Impl::dlock_noop_observer ||
         impl == Impl::dlock_prometheus;
}

// The observer an Impl runs with (none for plain dlock).
std::shared_ptr<Observer> observer_for(Impl impl) {
  if (impl == Impl::dlock_noop_observer) return std::make_shared<Observer>();
  if (impl == Impl::dlock_prometheus) return std::make_shared<PrometheusObserver>();
  return nullptr;
}

std::vector<std::string> urls_of(const Ports& ports) {
  std::vector<std::string> urls;
  for (auto p : ports) urls.push_back("redis://127.0.0.1:" + std::to_string(p));
  return urls;
}

std::optional<std::chrono::milliseconds> node_timeout;  // set_node_timeout()

Client connect(const std::vector<std::string>& nodes, Impl impl = Impl::dlock) {
  ClientOptions options;
  if (node_timeout) options.node_timeout = *node_timeout;
  options.observer = observer_for(impl);
  options.nodes = nodes;
  auto client = Client::create(options);
  if (!client) throw std::runtime_error("dlock: " + client.error().message());
  return std::move(*client);
}

Client connect(const Ports& ports, Impl impl = Impl::dlock) {
  return connect(urls_of(ports), impl);
}

LockOptions lock_options(Impl impl) {
  LockOptions o;  // the defaults a user gets: ttl 30 s, watchdog on
  o.fair = impl == Impl::dlock_fair;
  return o;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto tv = [](timeval t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

}  // namespace

void set_node_timeout(std::chrono::milliseconds timeout) {
  node_timeout = timeout;
}

const char* impl_name(Impl impl) {
  switch (impl) {
    case Impl::raw:
      return "raw floor";
    case Impl::raw_acquire_all:
      return "raw, acquire waits for all";
    case Impl::naive:
      return "naive (seed 000)";
    case Impl::dlock:
      return "dlock";
    case Impl::dlock_fair:
      return "dlock fair";
    case Impl::dlock_noop_observer:
      return "dlock, no-op observer";
    case Impl::dlock_prometheus:
      return "dlock, PrometheusObserver";
  }
  return "?";
}

std::vector<std::int64_t> latency(Impl impl, const Ports& ports, int cycles, int warmup,
                                  bool new_names) {
  std::vector<std::int64_t> samples;
  samples.reserve(static_cast<std::size_t>(cycles));
  // A new name per cycle: a name never locked before (its state created from nothing), as
  // when every job or request locks its own id.
  const std::string base = new_names ? "bench:latency:new:" : "bench:latency";
  const auto name_of = [&](int i) {
    return new_names ? base + std::to_string(i + warmup) + ":" + std::to_string(monotonic_ns())
                     : base;
  };
  if (is_dlock(impl)) {
    Client client = connect(ports, impl);
    const LockOptions options = lock_options(impl);
    for (int i = -warmup; i < cycles; ++i) {
      const std::string name = name_of(i);
      const auto t0 = monotonic_ns();
      auto lease = client.try_lock(name, options);
      if (!lease) throw std::runtime_error("dlock: " + lease.error().message());
      if (auto r = lease->unlock(); !r) throw std::runtime_error("dlock: " + r.error().message());
      if (i >= 0) samples.push_back(monotonic_ns() - t0);
    }
    return samples;
  }
  RawNodes raw(ports);
  const bool all = impl == Impl::raw_acquire_all;
  for (int i = -warmup; i < cycles; ++i) {
    const std::string name = name_of(i);
    const auto t0 = monotonic_ns();
    if (!raw.acquire(name, kToken, 30000, all)) throw std::runtime_error("raw: not acquired");
    if (impl == Impl::naive) {
      raw.eval_release(name, kToken);
    } else if (!raw.release(name, kToken)) {
      throw std::runtime_error("raw: not released");
    }
    if (i >= 0) samples.push_back(monotonic_ns() - t0);
  }
  return samples;
}

namespace {

// The raw floor's cycles per second: `round` (one batch of `per_round` cycles) again and again
// for `run`.
template <typename Round>
double raw_rate(std::chrono::milliseconds run, int per_round, Round round) {
  std::int64_t cycles = 0;
  const auto t0 = monotonic_ns();
  const auto end = t0 + std::chrono::nanoseconds(run).count();
  std::int64_t now = t0;
  while (now < end) {
    round();
    cycles += per_round;
    now = monotonic_ns();
  }
  return static_cast<double>(cycles) / (static_cast<double>(now - t0) / 1e9);
}

}  // namespace

double throughput(Impl impl, const Ports& ports, int inflight, std::chrono::milliseconds run) {
  std::vector<std::string> names;
  for (int i = 0; i < inflight; ++i) names.push_back("bench:tp:" + std::to_string(i));
  if (impl == Impl::raw) {
    RawNodes raw(ports);
    return raw_rate(run, inflight, [&] {
      if (inflight == 1) {
        raw.acquire(names[0], kToken, 30000);
        raw.release(names[0], kToken);
      } else {
        raw.pipelined_cycles(names, kToken, 30000);
      }
    });
  }
  Client client = connect(ports);
  const LockOptions options = lock_options(impl);
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> cycles{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  const auto t0 = monotonic_ns();
  for (const auto& name : names) {
    threads.emplace_back([&, name] {
      while (!stop.load(std::memory_order_relaxed)) {
        auto lease = client.try_lock(name, options);
        if (!lease || !lease->unlock()) failures.fetch_add(1);
        cycles.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  std::this_thread::sleep_for(run);
  stop = true;
  const auto t1 = monotonic_ns();
  for (auto& t : threads) t.join();
  if (failures.load() > 0) throw std::runtime_error("dlock: a throughput cycle failed");
  return static_cast<double>(cycles.load()) / (static_cast<double>(t1 - t0) / 1e9);
}

std::string async_name(int i) {
  return "bench:async:" + std::to_string(i);
}

namespace {

std::vector<std::string> async_names(int inflight) {
  std::vector<std::string> names;
  for (int i = 0; i < inflight; ++i) names.push_back(async_name(i));
  return names;
}

}  // namespace

double async_throughput(Impl impl, const Ports& ports, int inflight,
                        std::chrono::milliseconds run) {
  const std::vector<std::string> names = async_names(inflight);
  if (impl == Impl::raw) {
    RawNodes raw(ports);
    return raw_rate(run, inflight, [&] { raw.pipelined_cycles_all(names, kToken, 30000); });
  }
  return async_throughput(urls_of(ports), inflight, run);
}

double async_throughput(const std::vector<std::string>& nodes, int inflight,
                        std::chrono::milliseconds run,
                        std::optional<std::chrono::milliseconds> ttl) {
  const std::vector<std::string> names = async_names(inflight);
  Client client = connect(nodes);
  LockOptions options = lock_options(Impl::dlock);
  if (ttl) options.ttl = *ttl;
  asio::io_context io;
  bool stop = false;
  std::int64_t cycles = 0;
  int failures = 0;
  for (const auto& name : names) {
    asio::co_spawn(
        io,
        [&, name]() -> asio::awaitable<void> {
          while (!stop) {
            auto lease = co_await async_try_lock(client, name, options, asio::use_awaitable);
            if (!lease) {
              ++failures;
              continue;
            }
            auto released = co_await async_unlock(*lease, asio::use_awaitable);
            if (!released) ++failures;
            ++cycles;
          }
        },
        asio::detached);
  }
  asio::steady_timer timer(io, run);
  std::int64_t t1 = 0;
  std::int64_t counted = 0;
  timer.async_wait([&](const asio::error_code&) {
    t1 = monotonic_ns();
    counted = cycles;
    stop = true;
  });
  const auto t0 = monotonic_ns();
  io.run();
  if (failures > 0) throw std::runtime_error("dlock async: a throughput cycle failed");
  return static_cast<double>(counted) / (static_cast<double>(t1 - t0) / 1e9);
}

void async_cycles(const Ports& ports, int cycles) {
  Client client = connect(ports);
  const LockOptions options = lock_options(Impl::dlock);
  asio::io_context io;
  std::string failure;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < cycles && failure.empty(); ++i) {
          auto lease =
              co_await async_try_lock(client, "bench:async-cycles", options, asio::use_awaitable);
          if (!lease) {
            failure = lease.error().message();
          } else if (auto r = co_await async_unlock(*lease, asio::use_awaitable); !r) {
            failure = r.error().message();
          }
        }
      },
      asio::detached);
  io.run();
  if (!failure.empty()) throw std::runtime_error("dlock async: " + failure);
}

double server_cpu_seconds(const Ports& ports) {
  RawNodes raw(ports);
  double total = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    total += raw.info_real(i, "used_cpu_user") + raw.info_real(i, "used_cpu_sys");
  }
  return total;
}

std::vector<Acquisition> contend(Impl impl, const Ports& ports, const std::string& name, int count,
                                 int hold_us, std::int64_t start_at) {
  std::vector<Acquisition> out;
  out.reserve(static_cast<std::size_t>(count));
  const auto hold = std::chrono::microseconds(hold_us);
  const auto wait_until_start = [&] {
    while (monotonic_ns() < start_at) std::this_thread::sleep_for(200us);
  };
  if (impl == Impl::naive) {
    RawNodes raw(ports);
    std::mt19937_64 rng(std::random_device{}());
    std::uniform_int_distribution<int> nap_ms(0, 99);  // seed 000: nextLong(100)
    wait_until_start();
    for (int i = 0; i < count; ++i) {
      Acquisition a;
      a.start = monotonic_ns();
      while (!raw.acquire(name, kToken, 30000)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(nap_ms(rng)));
      }
      a.acquired = monotonic_ns();
      std::this_thread::sleep_for(hold);
      a.released = monotonic_ns();  // before the release: the lock is free from here on
      raw.eval_release(name, kToken);
      out.push_back(a);
    }
    return out;
  }
  if (impl == Impl::raw) throw std::invalid_argument("the raw floor does not wait");
  Client client = connect(ports);
  const LockOptions options = lock_options(impl);
  wait_until_start();
  for (int i = 0; i < count; ++i) {
    Acquisition a;
    a.start = monotonic_ns();
    auto lease = client.lock(name, 120s, options);
    if (!lease) throw std::runtime_error("dlock: " + lease.error().message());
    a.acquired = monotonic_ns();
    std::this_thread::sleep_for(hold);
    a.released = monotonic_ns();
    if (auto r = lease->unlock(); !r) throw std::runtime_error("dlock: " + r.error().message());
    out.push_back(a);
  }
  return out;
}

WatchdogCost watchdog_cost(const Ports& ports, int locks, std::chrono::milliseconds ttl,
                           std::chrono::milliseconds window) {
  RawNodes probe(ports);
  Client client = connect(ports);
  LockOptions options;
  options.ttl = ttl;  // renewed every ttl / 3
  std::vector<Lease> held;
  held.reserve(static_cast<std::size_t>(locks));
  for (int i = 0; i < locks; ++i) {
    auto lease = client.try_lock("bench:wd:" + std::to_string(i), options);
    if (!lease) throw std::runtime_error("dlock: " + lease.error().message());
    held.push_back(std::move(*lease));
  }
  std::this_thread::sleep_for(ttl / 3);  // let a first renewal round pass
  // Requests the client sent (scripts count once, not their inner commands).
  const auto requests = [&] { return probe.calls(0, "evalsha") + probe.calls(0, "eval"); };
  const long long commands0 = requests();
  const double cpu0 = cpu_seconds();
  const auto t0 = monotonic_ns();
  std::this_thread::sleep_for(window);
  const auto t1 = monotonic_ns();
  const double cpu1 = cpu_seconds();
  const long long commands1 = requests();
  WatchdogCost cost;
  const double seconds = static_cast<double>(t1 - t0) / 1e9;
  cost.ticks = seconds / (static_cast<double>(ttl.count()) / 3000.0);
  cost.commands_per_second = static_cast<double>(commands1 - commands0) / seconds;
  cost.client_cpu_percent = 100.0 * (cpu1 - cpu0) / seconds;
  for (auto& lease : held) {
    if (auto r = lease.unlock(); !r) throw std::runtime_error("dlock: " + r.error().message());
  }
  return cost;
}

double memory_per_lock(Impl impl, const Ports& ports, int locks) {
  RawNodes raw(ports);
  raw.command(0, {"FLUSHALL"});
  const long long before = raw.info(0, "used_memory");
  long long after = 0;
  if (impl == Impl::dlock) {
    Client client = connect(ports);
    LockOptions options;
    options.auto_renew = false;
    options.ttl = 120s;
    std::vector<Lease> held;
    for (int i = 0; i < locks; ++i) {
      auto lease = client.try_lock("bench:mem:" + std::to_string(i), options);
      if (!lease) throw std::runtime_error("dlock: " + lease.error().message());
      held.push_back(std::move(*lease));
    }
    after = raw.info(0, "used_memory");
    for (auto& lease : held) (void)lease.unlock();
  } else {
    for (int i = 0; i < locks; ++i) raw.acquire("bench:mem:" + std::to_string(i), kToken, 120000);
    after = raw.info(0, "used_memory");
  }
  raw.command(0, {"FLUSHALL"});
  return static_cast<double>(after - before) / locks;
}

NameFootprint memory_per_name(Impl impl, const Ports& ports, int names,
                              std::chrono::milliseconds ttl) {
  RawNodes raw(ports);
  raw.command(0, {"FLUSHALL"});
  auto keys = [&] { return std::stoll(raw.command(0, {"DBSIZE"})); };
  std::optional<Client> client;
  if (impl == Impl::dlock) {
    client.emplace(connect(ports));
    // The first lock greets the node (dlock's per-node bookkeeping): not a per-name cost.
    LockOptions warm;
    warm.ttl = ttl;
    if (auto l = client->try_lock("bench:warm-up", warm)) (void)l->unlock();
  }
  const long long memory_before = raw.info(0, "used_memory");
  const long long keys_before = keys();
  for (int i = 0; i < names; ++i) {
    const std::string name = "bench:name:" + std::to_string(i);
    if (impl == Impl::dlock) {
      LockOptions options;
      options.auto_renew = false;
      options.ttl = ttl;
      auto lease = client->try_lock(name, options);
      if (!lease) throw std::runtime_error("dlock: " + lease.error().message());
      (void)lease->unlock();
    } else {
      raw.acquire(name, kToken, ttl.count());
      raw.release(name, kToken);
    }
  }
  std::this_thread::sleep_for(ttl + 1s);
  // Redis expires keys lazily and by sampling: a full SCAN touches (and expires) every key.
  std::string cursor = "0";
  do {
    cursor = raw.scan_cursor(0, cursor);
  } while (cursor != "0");
  NameFootprint f;
  f.bytes_per_name = static_cast<double>(raw.info(0, "used_memory") - memory_before) / names;
  f.keys_per_name = static_cast<double>(keys() - keys_before) / names;
  raw.command(0, {"FLUSHALL"});
  return f;
}

double mixed_sections(MixedLock how, const Ports& ports, int threads, double read_share,
                      std::chrono::microseconds hold, std::chrono::milliseconds run) {
  Client client = connect(ports);
  LockOptions o;
  o.ttl = 10s;
  o.auto_renew = false;  // the sections are short: measure locking, not the watchdog
  SharedMutex lock(client, "bench:mixed", o);
  Semaphore permits(client, "bench:mixed-permits", kBenchPermits, o);
  std::atomic<bool> stop{false};
  std::atomic<long> sections{0};
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1u);
        std::bernoulli_distribution reads(read_share);
        while (!stop.load(std::memory_order_relaxed)) {
          if (how == MixedLock::semaphore) {
            auto permit = permits.acquire_lease(10s);
            if (!permit) throw std::runtime_error("semaphore: " + permit.error().message());
            std::this_thread::sleep_for(hold);
          } else if (how == MixedLock::shared && reads(rng)) {
            std::shared_lock guard(lock);
            std::this_thread::sleep_for(hold);
          } else {
            std::unique_lock guard(lock);
            std::this_thread::sleep_for(hold);
          }
          sections.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    std::this_thread::sleep_for(run);
    stop = true;
  }
  return static_cast<double>(sections.load()) / std::chrono::duration<double>(run).count();
}

}  // namespace dlock::bench

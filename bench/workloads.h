// SPDX-License-Identifier: MIT
// The measurements dlock and the raw floor run in this process (the peers run the same ones in
// their own language: bench/peers/). Each takes the nodes' ports and returns raw samples or
// counts; summarizing and comparing is main.cc's and report.cc's job.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlock::bench {

using Ports = std::vector<std::uint16_t>;

// raw_acquire_all: the raw floor with dlock's waiting rule on N nodes: the acquire waits for
// every node (what keeps fencing tokens growing, docs/design.md), the release for a quorum.
// dlock_noop_observer, dlock_prometheus: dlock with ClientOptions::observer set to an Observer
// that does nothing, or to a PrometheusObserver (what an observer costs; Impl::dlock has none).
enum class Impl {
  raw,
  raw_acquire_all,
  naive,
  dlock,
  dlock_fair,
  dlock_noop_observer,
  dlock_prometheus
};
const char* impl_name(Impl impl);

// ClientOptions::node_timeout for every dlock client this process makes from now on (unset:
// the default a user gets). For counting instructions under valgrind, where the client runs
// tens of times slower and a first greeting can miss the default 200 ms; a deadline's value
// changes no instruction of a cycle that meets it.
void set_node_timeout(std::chrono::milliseconds timeout);

// Acquire+release cycles, one after another: one sample (ns) per cycle. On one name, or with
// `new_names` on a name never used before in every cycle.
std::vector<std::int64_t> latency(Impl impl, const Ports& ports, int cycles, int warmup,
                                  bool new_names = false);

// Cycles per second with `inflight` cycles in flight from this process on distinct names:
// dlock with that many threads sharing one client, the raw floor pipelined on one connection.
double throughput(Impl impl, const Ports& ports, int inflight, std::chrono::milliseconds run);

// Cycles per second with `inflight` cycles in flight from one thread on distinct names, on all
// of `ports`: dlock's asio API (that many coroutines on one io_context, Impl::dlock), or the raw
// floor pipelined on one connection per node (Impl::raw).
double async_throughput(Impl impl, const Ports& ports, int inflight, std::chrono::milliseconds run);
// `cycles` acquire+release cycles through dlock's asio API, one after another (one in flight) on
// one name, from one coroutine on an io_context of this thread: what callgrind counts per cycle
// for the asio path (bench/instructions.sh).
void async_cycles(const Ports& ports, int cycles);
// The i-th of the distinct names async_throughput locks.
std::string async_name(int i);
// dlock's part of the above on nodes named by URL: one redis-cluster:// URL makes a whole Redis
// Cluster one node, and the distinct names spread over its hash slots.
// `ttl`: the leases' ttl (unset: the default a user gets).
double async_throughput(const std::vector<std::string>& nodes, int inflight,
                        std::chrono::milliseconds run,
                        std::optional<std::chrono::milliseconds> ttl = std::nullopt);

// CPU seconds (user + system) the redis-servers on `ports` used so far, summed.
double server_cpu_seconds(const Ports& ports);

// One contention worker: waits until start_at (monotonic ns), then takes `name` `count` times
// and holds it `hold_us` each time. Returns [wait_start, acquired, released] per acquisition.
struct Acquisition {
  std::int64_t start = 0;
  std::int64_t acquired = 0;
  std::int64_t released = 0;
};
std::vector<Acquisition> contend(Impl impl, const Ports& ports, const std::string& name, int count,
                                 int hold_us, std::int64_t start_at);

// Watchdog cost: `locks` locks held with auto-renewal (ttl, renewed every ttl/3) for `window`.
struct WatchdogCost {
  double commands_per_second = 0;  // script calls the node got (inner commands not counted)
  double client_cpu_percent = 0;   // of one core, user+system, whole client process
  double ticks = 0;
};
WatchdogCost watchdog_cost(const Ports& ports, int locks, std::chrono::milliseconds ttl,
                           std::chrono::milliseconds window);

// Redis memory per held lock (bytes): used_memory with `locks` held minus before, / locks.
double memory_per_lock(Impl impl, const Ports& ports, int locks);

// What a name costs Redis once it is no longer locked: `names` distinct names each taken and
// released once (ttl `ttl`), then, a second after the ttl, used_memory and keys minus before.
struct NameFootprint {
  double bytes_per_name = 0;
  double keys_per_name = 0;
};
NameFootprint memory_per_name(Impl impl, const Ports& ports, int names,
                              std::chrono::milliseconds ttl);

// Shared and counted locks: `threads` threads of one client take one name for `run`, each
// critical section held `hold`. `how` picks what guards it: every section exclusive (Mutex,
// what one would use without a read-write lock), a SharedMutex with `read_share` of the
// sections reads, or a Semaphore of kBenchPermits permits. Returns critical sections per
// second, all threads together.
enum class MixedLock { exclusive, shared, semaphore };
inline constexpr int kBenchPermits = 4;
double mixed_sections(MixedLock how, const Ports& ports, int threads, double read_share,
                      std::chrono::microseconds hold, std::chrono::milliseconds run);

}  // namespace dlock::bench

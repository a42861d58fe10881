// SPDX-License-Identifier: MIT
#include "service_workloads.h"

#include <dlock/dlock.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "contention.h"
#include "service_client.h"
#include "stats.h"

namespace dlock::bench {
namespace {

using namespace std::chrono_literals;

template <typename Locks>
std::vector<std::int64_t> served_latency(Locks& locks, const std::string& name, int cycles,
                                         int warmup) {
  std::vector<std::int64_t> samples;
  for (int i = -warmup; i < cycles; ++i) {
    const auto t0 = monotonic_ns();
    locks.release(name, locks.acquire(name));
    if (i >= 0) samples.push_back(monotonic_ns() - t0);
  }
  return samples;
}

void append(std::vector<std::int64_t>& to, const std::vector<std::int64_t>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

// Interleaved rounds, so that the machine's drift hits every row alike; samples pooled.
void measure_cycles(ServiceResults& r, const Ports& ports, const ServiceUnderTest& service,
                    int cycles, int warmup) {
  GrpcLocks grpc(service.grpc_address());
  HttpLocks http(service.http_address());
  std::vector<std::int64_t> raw, library, over_grpc, over_http;
  const int n = cycles / r.rounds;
  const int w = warmup / r.rounds;
  for (int round = 0; round < r.rounds; ++round) {
    append(raw, latency(Impl::raw, ports, n, w));
    append(library, latency(Impl::dlock, ports, n, w));
    append(over_grpc, served_latency(grpc, "bench:svc:latency", n, w));
    append(over_http, served_latency(http, "bench:svc:latency", n, w));
  }
  r.raw_cycle = summarize(std::move(raw));
  r.library.cycle = summarize(std::move(library));
  r.grpc.cycle = summarize(std::move(over_grpc));
  r.http.cycle = summarize(std::move(over_http));
}

// `inflight` HTTP clients, a thread and a connection each, cycling on names of their own.
double http_in_flight(const std::string& address, int inflight, std::chrono::milliseconds run) {
  std::vector<std::unique_ptr<HttpLocks>> clients;
  for (int i = 0; i < inflight; ++i) clients.push_back(std::make_unique<HttpLocks>(address));
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> cycles{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  const auto t0 = monotonic_ns();
  for (int i = 0; i < inflight; ++i) {
    threads.emplace_back([&, i] {
      const std::string name = async_name(i);
      try {
        while (!stop.load(std::memory_order_relaxed)) {
          clients[static_cast<std::size_t>(i)]->release(
              name, clients[static_cast<std::size_t>(i)]->acquire(name));
          cycles.fetch_add(1, std::memory_order_relaxed);
        }
      } catch (const std::exception&) {
        failures.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(run);
  const auto counted = cycles.load();
  const auto t1 = monotonic_ns();
  stop = true;
  for (auto& t : threads) t.join();
  if (failures.load() > 0) throw std::runtime_error("HTTP: a cycle in flight failed");
  return static_cast<double>(counted) / (static_cast<double>(t1 - t0) / 1e9);
}

struct Flight {
  std::vector<double> per_second, service_us, redis_us;
};

// Rounds of the three in-flight rows, each with the CPU the service and Redis spent on it.
void measure_in_flight(ServiceResults& r, const Ports& ports, const ServiceUnderTest& service) {
  const auto run = std::chrono::milliseconds(static_cast<long>(r.run_ms));
  GrpcLocks grpc(service.grpc_address());
  std::vector<std::string> names;
  for (int i = 0; i < r.inflight; ++i) names.push_back(async_name(i));
  std::map<ServiceRow*, Flight> flights;
  const auto measure = [&](ServiceRow& row, const std::function<double()>& body) {
    const double service0 = service.cpu_seconds();
    const double redis0 = server_cpu_seconds(ports);
    const double per_s = body();
    const double service1 = service.cpu_seconds();
    const double redis1 = server_cpu_seconds(ports);
    const double cycles = per_s * r.run_ms / 1000.0;
    auto& f = flights[&row];
    f.per_second.push_back(per_s);
    f.service_us.push_back((service1 - service0) * 1e6 / cycles);
    f.redis_us.push_back((redis1 - redis0) * 1e6 / cycles);
  };
  for (int round = 0; round < r.rounds; ++round) {
    measure(r.library, [&] { return async_throughput(Impl::dlock, ports, r.inflight, run); });
    measure(r.grpc, [&] { return grpc.cycles_in_flight(names, run); });
    measure(r.http, [&] { return http_in_flight(service.http_address(), r.inflight, run); });
  }
  for (auto& [row, f] : flights) {
    row->per_second = median(f.per_second);
    row->service_us = row == &r.library ? NAN : median(f.service_us);
    row->redis_us = median(f.redis_us);
  }
}

// One waiting client: takes the name (waiting as long as it takes) and gives it back.
class Waiter {
 public:
  virtual ~Waiter() = default;
  virtual void lock(const std::string& name) = 0;
  virtual void unlock(const std::string& name) = 0;
};

class LibraryWaiter : public Waiter {
 public:
  explicit LibraryWaiter(const Ports& ports) : client_(connect(ports)) {}
  void lock(const std::string& name) override {
    auto lease = client_.lock(name, 120s);
    if (!lease) throw std::runtime_error("dlock: " + lease.error().message());
    lease_.emplace(std::move(*lease));
  }
  void unlock(const std::string&) override {
    if (auto r = lease_->unlock(); !r) throw std::runtime_error("dlock: " + r.error().message());
    lease_.reset();
  }

 private:
  static Client connect(const Ports& ports) {
    ClientOptions options;
    options.nodes = {"redis://127.0.0.1:" + std::to_string(ports.at(0))};
    auto client = Client::create(options);
    if (!client) throw std::runtime_error("dlock: " + client.error().message());
    return std::move(*client);
  }
  Client client_;
  std::optional<Lease> lease_;
};

template <typename Locks>
class ServedWaiter : public Waiter {
 public:
  explicit ServedWaiter(const std::string& address) : locks_(address) {}
  void lock(const std::string& name) override { owner_ = locks_.acquire(name, 120000); }
  void unlock(const std::string& name) override { locks_.release(name, owner_); }

 private:
  Locks locks_;
  std::string owner_;
};

// Every waiter in a thread of its own takes one name `count` times, holding it `hold` each time,
// all starting together; the analysis is the contention section's (contention.h).
ContentionStats handoffs(const std::vector<std::unique_ptr<Waiter>>& waiters, int count,
                         std::chrono::microseconds hold) {
  const std::string name = "bench:svc:handoff:" + std::to_string(monotonic_ns());
  const std::int64_t start_at = monotonic_ns() + 200'000'000;
  std::vector<std::vector<Acquisition>> all(waiters.size());
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> threads;
    for (std::size_t w = 0; w < waiters.size(); ++w) {
      threads.emplace_back([&, w] {
        while (monotonic_ns() < start_at) std::this_thread::sleep_for(200us);
        try {
          for (int i = 0; i < count; ++i) {
            Acquisition a;
            a.start = monotonic_ns();
            waiters[w]->lock(name);
            a.acquired = monotonic_ns();
            std::this_thread::sleep_for(hold);
            a.released = monotonic_ns();  // before the release: free from here on
            waiters[w]->unlock(name);
            all[w].push_back(a);
          }
        } catch (const std::exception&) {
          failures.fetch_add(1);
        }
      });
    }
  }
  if (failures.load() > 0) throw std::runtime_error("a waiting client failed");
  return analyze(all);
}

void record(ServiceRow& row, const ContentionStats& c) {
  row.handoff = c.handoff;
  row.overlaps = c.overlaps;
  row.acquisitions = c.acquisitions;
}

void measure_handoffs(ServiceResults& r, const Ports& ports, const ServiceUnderTest& service) {
  const auto hold = std::chrono::microseconds(r.hold_us);
  const auto make = [&](auto factory) {
    std::vector<std::unique_ptr<Waiter>> waiters;
    for (int i = 0; i < r.waiters; ++i) waiters.push_back(factory());
    return waiters;
  };
  record(r.library, handoffs(make([&] { return std::make_unique<LibraryWaiter>(ports); }),
                             r.per_waiter, hold));
  record(r.grpc,
         handoffs(make([&] {
                    return std::make_unique<ServedWaiter<GrpcLocks>>(service.grpc_address());
                  }),
                  r.per_waiter, hold));
  record(r.http,
         handoffs(make([&] {
                    return std::make_unique<ServedWaiter<HttpLocks>>(service.http_address());
                  }),
                  r.per_waiter, hold));
}

}  // namespace

ServiceResults measure_service(const Ports& ports, const ServiceUnderTest& service, bool smoke,
                               const std::function<void(const std::string&)>& say) {
  ServiceResults r;
  r.rounds = smoke ? 1 : 5;
  r.inflight = 64;
  r.run_ms = smoke ? 300 : 2000;
  r.waiters = 8;
  r.hold_us = 1000;
  r.per_waiter = smoke ? 10 : 200;
  say("service: uncontended cycles (gRPC, HTTP/JSON, library, raw floor)");
  measure_cycles(r, ports, service, smoke ? 50 : 4000, smoke ? 5 : 300);
  say("service: " + std::to_string(r.inflight) + " in flight");
  measure_in_flight(r, ports, service);
  say("service: hand-off to " + std::to_string(r.waiters) + " waiting clients");
  measure_handoffs(r, ports, service);
  return r;
}

}  // namespace dlock::bench

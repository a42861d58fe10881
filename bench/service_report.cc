// SPDX-License-Identifier: MIT
#include "service_report.h"

#include <iomanip>
#include <sstream>
#include <utility>

namespace dlock::bench {
namespace {

std::string fixed(double v, int digits = 1) {
  if (std::isnan(v) || std::isinf(v)) return "–";
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string ratio(double v) {
  return std::isnan(v) || std::isinf(v) ? "–" : fixed(v, 2) + "×";
}

std::string thousands(double v) {
  if (std::isnan(v)) return "–";
  std::string s = std::to_string(static_cast<long long>(std::llround(v)));
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<std::size_t>(i), ",");
  return s;
}

std::string ms(double us) {
  return fixed(us / 1000.0, 2);
}

// The two transports, labelled as in the tables.
std::vector<std::pair<std::string, const ServiceRow*>> served(const ServiceResults& r) {
  return {{"dlock serve, gRPC", &r.grpc}, {"dlock serve, HTTP/JSON", &r.http}};
}

}  // namespace

std::vector<ServiceTarget> service_targets(const ServiceResults& r) {
  std::vector<ServiceTarget> t;
  for (const auto& [label, row] : served(r)) {
    const double cycle = row->cycle.p50 / r.library.cycle.p50;
    t.push_back({label + ": uncontended cycle ≤ 1.5 × the library's on 1 node (p50, issue 31)",
                 ratio(cycle), cycle <= 1.5});
  }
  for (const auto& [label, row] : served(r)) {
    const double x = row->per_second / r.library.per_second;
    t.push_back({label + ", " + std::to_string(r.inflight) +
                     " in flight through one instance: ≥ 0.5 × the library's asio API",
                 ratio(x), x >= 0.5});
  }
  for (const auto& [label, row] : served(r)) {
    t.push_back({label + ": hand-off to one of " + std::to_string(r.waiters) +
                     " waiting clients ≤ 2 ms (mean)",
                 ms(row->handoff.mean) + " ms", row->handoff.mean <= 2000 && row->overlaps == 0});
  }
  return t;
}

void write_service_markdown(const ServiceResults& r, std::ostream& md) {
  md << "\n## Through the service\n\n"
     << "`dlock serve` (docs/service.md) started by the bench on free loopback ports in front of "
        "node 0 (placed like the redis-servers), and driven by C++ clients in the bench: the "
        "gRPC stubs of proto/dlock/v1/lock.proto and libcurl for HTTP/JSON, each with its own "
        "connection. The library's rows were measured in the same "
     << r.rounds
     << " interleaved rounds (cycle samples pooled over rounds, in-flight rates the median "
        "round), so the ratios compare like with like. "
        "Service acquires use the defaults a client gets (ttl 30 s, the owner made by the "
        "service).\n\n"
     << "Uncontended try-lock + release, one client, one name (µs):\n\n"
     << "| client | p50 | mean | p99 | p50 ÷ dlock's | p50 ÷ raw floor's |\n"
     << "|---|---|---|---|---|---|\n";
  const auto cycle_row = [&](const std::string& label, const Summary& s) {
    md << "| " << label << " | " << fixed(s.p50) << " | " << fixed(s.mean) << " | " << fixed(s.p99)
       << " | " << ratio(s.p50 / r.library.cycle.p50) << " | " << ratio(s.p50 / r.raw_cycle.p50)
       << " |\n";
  };
  cycle_row("raw floor", r.raw_cycle);
  cycle_row("dlock (library)", r.library.cycle);
  for (const auto& [label, row] : served(r)) cycle_row(label, row->cycle);

  md << "\n"
     << r.inflight << " cycles in flight on distinct names for " << fixed(r.run_ms, 0)
     << " ms a round: the library's asio API from one thread; gRPC with the callback API on "
        "one channel; HTTP/JSON from "
     << r.inflight
     << " clients (a thread and a connection each). CPU per cycle in µs: the service process "
        "(/proc/PID/stat utime + stime) and the redis-server (INFO used_cpu_user + sys).\n\n"
     << "| client | cycles/s | ÷ dlock async | service CPU per cycle | Redis CPU per cycle |\n"
     << "|---|---|---|---|---|\n";
  const auto flight_row = [&](const std::string& label, const ServiceRow& row) {
    md << "| " << label << " | " << thousands(row.per_second) << " | "
       << ratio(row.per_second / r.library.per_second) << " | " << fixed(row.service_us) << " | "
       << fixed(row.redis_us) << " |\n";
  };
  flight_row("dlock async (library)", r.library);
  for (const auto& [label, row] : served(r)) flight_row(label, *row);

  md << "\n"
     << r.waiters << " clients (threads of the bench, each with its own Client or "
     << "connection) take one name " << r.per_waiter << " times each and hold it "
     << fixed(r.hold_us / 1000.0, 1)
     << " ms; hand-off is from a release to the grant of a client that was waiting (ms). The "
        "library's row is Client::lock; the service's is Acquire with wait_ms.\n\n"
     << "| client | hand-off mean | p50 | p99 | grants | overlaps | mean ÷ dlock's |\n"
     << "|---|---|---|---|---|---|---|\n";
  const auto handoff_row = [&](const std::string& label, const ServiceRow& row) {
    md << "| " << label << " | " << ms(row.handoff.mean) << " | " << ms(row.handoff.p50) << " | "
       << ms(row.handoff.p99) << " | " << row.acquisitions << " | " << row.overlaps << " | "
       << ratio(row.handoff.mean / r.library.handoff.mean) << " |\n";
  };
  handoff_row("dlock (library)", r.library);
  for (const auto& [label, row] : served(r)) handoff_row(label, *row);
}

void write_service_csv(const ServiceResults& r, std::ostream& csv) {
  const auto row = [&](const std::string& impl, int k, const char* metric, double v,
                       const char* unit) {
    csv << "service," << impl << "," << k << "," << metric << "," << v << "," << unit << "\n";
  };
  row("raw floor", 1, "cycle_p50", r.raw_cycle.p50, "us");
  // No comma in these labels: they are a field of the csv.
  const std::vector<std::pair<std::string, const ServiceRow*>> rows{
      {"dlock", &r.library}, {"dlock serve gRPC", &r.grpc}, {"dlock serve HTTP/JSON", &r.http}};
  for (const auto& [impl, s] : rows) {
    row(impl, 1, "cycle_p50", s->cycle.p50, "us");
    row(impl, 1, "cycle_mean", s->cycle.mean, "us");
    row(impl, 1, "cycle_p99", s->cycle.p99, "us");
    row(impl, r.inflight, "cycles", s->per_second, "per_s");
    row(impl, r.inflight, "service_cpu", s->service_us, "us_per_cycle");
    row(impl, r.inflight, "redis_cpu", s->redis_us, "us_per_cycle");
    row(impl, r.waiters, "handoff_mean", s->handoff.mean, "us");
    row(impl, r.waiters, "handoff_p50", s->handoff.p50, "us");
    row(impl, r.waiters, "overlaps", static_cast<double>(s->overlaps), "count");
  }
}

}  // namespace dlock::bench

// SPDX-License-Identifier: MIT
// Per-endpoint request metrics of the lock service, for /metrics beside the library's
// PrometheusObserver output (docs/service.md, "Metrics"): a counter of requests by transport,
// endpoint and status, and a latency histogram by transport and endpoint (not by status, to
// keep the series few). HTTP records in http_routes.cc's handle(), gRPC through a server
// interceptor (endpoint_interceptor.h). Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace dlock::service {

class EndpointMetrics {
 public:
  // One request: `endpoint` is the route ("POST /v1/locks/{name}:acquire") or the gRPC method
  // ("/dlock.v1.Locks/Acquire"); `status` the HTTP status or the gRPC code's name; `latency`
  // from its arrival to its answer (a wait's time included; a stream's whole life).
  void record(std::string_view transport, std::string_view endpoint, std::string_view status,
              std::chrono::nanoseconds latency);
  // dlock_service_requests_total and dlock_service_request_seconds, Prometheus text format.
  std::string text() const;

  // The histogram's upper bounds, in seconds (+Inf implied): a try is sub-millisecond, a wait
  // or a stream may last minutes.
  static const std::vector<double>& bounds();

 private:
  struct Histogram {
    std::vector<std::uint64_t> buckets;  // per bound, not cumulative; the last: over them all
    double sum_seconds = 0;
    std::uint64_t count = 0;
  };
  using Key = std::tuple<std::string, std::string, std::string>;  // transport, endpoint, status

  mutable std::mutex mu_;
  std::map<Key, std::uint64_t> requests_;                               // guarded by mu_
  std::map<std::pair<std::string, std::string>, Histogram> latencies_;  // guarded by mu_
};

// The name gRPC gives a status code ("OK", "ABORTED", ...), as in its docs and other servers'
// metrics.
std::string_view grpc_code_name(int code);

}  // namespace dlock::service

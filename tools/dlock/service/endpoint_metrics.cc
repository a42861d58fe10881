// SPDX-License-Identifier: MIT
#include "service/endpoint_metrics.h"

#include <array>
#include <sstream>

namespace dlock::service {

namespace {

// A label value, escaped as the text format wants (backslash, quote, newline).
std::string escaped(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

std::string labels(const std::string& transport, const std::string& endpoint) {
  return "transport=\"" + escaped(transport) + "\",endpoint=\"" + escaped(endpoint) + "\"";
}

}  // namespace

const std::vector<double>& EndpointMetrics::bounds() {
  static const std::vector<double> kBounds{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  return kBounds;
}

void EndpointMetrics::record(std::string_view transport, std::string_view endpoint,
                             std::string_view status, std::chrono::nanoseconds latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  std::size_t bucket = 0;
  while (bucket < bounds().size() && seconds > bounds()[bucket]) ++bucket;
  std::lock_guard lock(mu_);
  ++requests_[Key{std::string(transport), std::string(endpoint), std::string(status)}];
  Histogram& h = latencies_[{std::string(transport), std::string(endpoint)}];
  if (h.buckets.empty()) h.buckets.resize(bounds().size() + 1);
  ++h.buckets[bucket];
  h.sum_seconds += seconds;
  ++h.count;
}

std::string EndpointMetrics::text() const {
  std::ostringstream out;
  out.precision(12);  // a sum of many seconds keeps its milliseconds
  std::lock_guard lock(mu_);
  out << "# HELP dlock_service_requests_total Requests dlock serve answered, by transport, "
         "endpoint and status.\n# TYPE dlock_service_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    const auto& [transport, endpoint, status] = key;
    out << "dlock_service_requests_total{" << labels(transport, endpoint) << ",status=\""
        << escaped(status) << "\"} " << count << "\n";
  }
  out << "# HELP dlock_service_request_seconds Time from a request's arrival to its answer, by "
         "transport and endpoint.\n# TYPE dlock_service_request_seconds histogram\n";
  for (const auto& [key, h] : latencies_) {
    const std::string l = labels(key.first, key.second);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < bounds().size(); ++i) {
      cumulative += h.buckets[i];
      out << "dlock_service_request_seconds_bucket{" << l << ",le=\"" << bounds()[i] << "\"} "
          << cumulative << "\n";
    }
    out << "dlock_service_request_seconds_bucket{" << l << ",le=\"+Inf\"} " << h.count << "\n";
    out << "dlock_service_request_seconds_sum{" << l << "} " << h.sum_seconds << "\n";
    out << "dlock_service_request_seconds_count{" << l << "} " << h.count << "\n";
  }
  return out.str();
}

std::string_view grpc_code_name(int code) {
  static constexpr std::array<std::string_view, 17> kNames{"OK",
                                                           "CANCELLED",
                                                           "UNKNOWN",
                                                           "INVALID_ARGUMENT",
                                                           "DEADLINE_EXCEEDED",
                                                           "NOT_FOUND",
                                                           "ALREADY_EXISTS",
                                                           "PERMISSION_DENIED",
                                                           "RESOURCE_EXHAUSTED",
                                                           "FAILED_PRECONDITION",
                                                           "ABORTED",
                                                           "OUT_OF_RANGE",
                                                           "UNIMPLEMENTED",
                                                           "INTERNAL",
                                                           "UNAVAILABLE",
                                                           "DATA_LOSS",
                                                           "UNAUTHENTICATED"};
  return code >= 0 && code < static_cast<int>(kNames.size()) ? kNames[code] : "UNKNOWN";
}

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
// The HTTP/JSON API of the lock service (docs/service.md): which request is which operation,
// its JSON body in, its outcome out. No sockets: http_server.h reads and writes the bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "service/access_log.h"
#include "service/endpoint_metrics.h"
#include "service/guard.h"
#include "service/keepalive.h"
#include "service/operations.h"

namespace dlock::service {

struct HttpRequest {
  std::string method;
  std::string target;  // the path as sent, percent-encoded
  std::string body;
  Caller caller;  // the Authorization header, and the client's IP address
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // A grant's: run instead when the answer cannot be sent (the client hung up while the grant
  // was on its way). It gives the lock back rather than leave it blocked for a ttl.
  std::function<void()> undelivered = {};
};

enum class Route { acquire, extend, release, status, renew, healthz, readyz, metrics, not_found };

struct Routed {
  Route route = Route::not_found;
  std::string name;           // decoded, for the /v1/locks/ routes
  bool method_ok = true;      // false: the path exists, not with this method (405)
  bool bad_encoding = false;  // a % not followed by two hex digits (400)
};

// Percent-decoding of a path segment; empty when malformed. Pure.
std::optional<std::string> percent_decode(std::string_view text);
// Which route a request takes. Pure.
Routed route(std::string_view method, std::string_view target);
// The HTTP status for an outcome. Pure.
int http_status(Code code);
// {"error": message} with `status`.
HttpResponse error_response(int status, const std::string& message);

// The operations' input from a JSON body; a Failure (400) names the bad field. Pure.
Outcome<AcquireInput> acquire_input(const std::string& name, const std::string& body);
struct OwnerInput {
  std::string owner;
  std::optional<std::int64_t> ttl_ms;
  Mode mode = Mode::exclusive;  // the mode the hold was granted in
  std::uint32_t permit = 0;     // a permit: the grant's "permit"
};
Outcome<OwnerInput> owner_input(const std::string& body);
// POST /v1/leases:renew's body: {"leases": [{"name", "owner", "ttl_ms", "mode", "permit"}, ...]}
// (ttl_ms required). Pure.
Outcome<std::vector<LeaseRenewal>> renew_input(const std::string& body);

// Serves one request; `done` runs once, on a thread of the operations' pool or at once.
// `pending` lets the connection cancel a wait when its client hangs up. `ready` answers
// /readyz (true when a quorum of nodes answers); `metrics` gives /metrics' text. `guard`
// (none: no checks) passes every /v1 request and /metrics first; /healthz and /readyz are
// open, for load balancers and probes.
struct HttpHandlers {
  Operations* ops = nullptr;
  Guard* guard = nullptr;
  std::function<void(std::function<void(bool)>)> ready;
  std::function<std::string()> metrics;
  // Where each request's route, status and latency is counted (none: not counted).
  EndpointMetrics* endpoints = nullptr;
  // Where each request gets its access log line (none: not logged).
  AccessLog* access_log = nullptr;
};
// The endpoint label of a request in EndpointMetrics: its method and route, the name left out
// ("POST /v1/locks/{name}:acquire"); "other" for a path or method not served. Pure.
std::string endpoint_label(const Routed& r, std::string_view method);
void handle(const HttpHandlers& handlers, const HttpRequest& request,
            std::shared_ptr<PendingAcquire> pending, std::function<void(HttpResponse)> done);

}  // namespace dlock::service

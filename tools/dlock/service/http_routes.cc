// SPDX-License-Identifier: MIT
#include "service/http_routes.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "status_command.h"

namespace dlock::service {

namespace {

constexpr std::string_view kLocks = "/v1/locks/";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// JSON text of a value: names and owners are bytes, and JSON wants UTF-8, so invalid bytes
// print as U+FFFD instead of failing (as `dlock status --json` does).
std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse ok(const nlohmann::json& j) {
  return HttpResponse{200, "application/json", dump(j) + "\n"};
}

HttpResponse failed(const Failure& f) {
  if (!f.holder_ttl_ms) return error_response(http_status(f.code), f.message);
  nlohmann::json j{{"error", f.message}, {"holder_ttl_ms", *f.holder_ttl_ms}};
  return HttpResponse{http_status(f.code), "application/json", dump(j) + "\n"};
}

// Reads an optional integer field; a Failure names it when it has another type.
std::optional<Failure> read_int(const nlohmann::json& j, const char* key,
                                std::optional<std::int64_t>& out) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number_integer()) {
    return Failure{Code::invalid_argument, std::string(key) + " must be an integer"};
  }
  out = j[key].get<std::int64_t>();
  return std::nullopt;
}

Outcome<nlohmann::json> parse_object(const std::string& body) {
  if (body.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Failure{Code::invalid_argument, "the body must be a JSON object"};
  }
  return j;
}

std::optional<Failure> read_owner(const nlohmann::json& j, std::string& out) {
  if (!j.contains("owner") || j["owner"].is_null()) return std::nullopt;
  if (!j["owner"].is_string()) return Failure{Code::invalid_argument, "owner must be a string"};
  out = j["owner"].get<std::string>();
  return std::nullopt;
}

std::optional<Failure> read_mode(const nlohmann::json& j, Mode& out) {
  if (!j.contains("mode") || j["mode"].is_null()) return std::nullopt;
  const auto& mode = j["mode"];
  if (mode == "EXCLUSIVE") {
    out = Mode::exclusive;
  } else if (mode == "SHARED") {
    out = Mode::shared;
  } else if (mode == "PERMIT") {
    out = Mode::permit;
  } else {
    return Failure{Code::invalid_argument, "mode must be EXCLUSIVE, SHARED or PERMIT"};
  }
  return std::nullopt;
}

// Reads an optional count (permits, permit) into a uint32.
std::optional<Failure> read_count(const nlohmann::json& j, const char* key, std::uint32_t& out) {
  std::optional<std::int64_t> value;
  if (auto bad = read_int(j, key, value)) return bad;
  if (value && (*value < 0 || *value > UINT32_MAX)) {
    return Failure{Code::invalid_argument, std::string(key) + " out of range"};
  }
  out = static_cast<std::uint32_t>(value.value_or(0));
  return std::nullopt;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;  // fewer than two characters follow
    const int high = hex_value(text[i + 1]);
    const int low = hex_value(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

Routed route(std::string_view method, std::string_view target) {
  Routed r;
  if (const auto query = target.find('?'); query != std::string_view::npos) {
    target = target.substr(0, query);
  }
  const auto plain = [&](Route route, std::string_view path) {
    if (target != path) return false;
    r.route = route;
    r.method_ok = method == "GET";
    return true;
  };
  if (plain(Route::healthz, "/healthz") || plain(Route::readyz, "/readyz") ||
      plain(Route::metrics, "/metrics")) {
    return r;
  }
  if (plain(Route::renew, "/v1/leases:renew")) {
    r.method_ok = method == "POST";
    return r;
  }
  if (target.substr(0, kLocks.size()) != kLocks) return r;
  std::string_view rest = target.substr(kLocks.size());
  r.route = Route::status;
  // The verb follows the last ':'; a ':' inside a name is sent percent-encoded (%3A).
  if (const auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    const std::string_view verb = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    r.route = verb == "acquire"   ? Route::acquire
              : verb == "extend"  ? Route::extend
              : verb == "release" ? Route::release
                                  : Route::not_found;
  }
  if (rest.empty() || rest.find('/') != std::string_view::npos) r.route = Route::not_found;
  if (r.route == Route::not_found) return r;
  r.method_ok = method == (r.route == Route::status ? "GET" : "POST");
  auto name = percent_decode(rest);
  r.bad_encoding = !name;
  if (name) r.name = std::move(*name);
  return r;
}

int http_status(Code code) {
  switch (code) {
    case Code::ok:
      return 200;
    case Code::invalid_argument:
      return 400;
    case Code::held:
    case Code::wait_timeout:
    case Code::not_owner:
      return 409;
    case Code::unavailable:
      return 503;
    case Code::cancelled:
      return 499;  // nobody reads it: the client went away
    case Code::unimplemented:
      return 501;
    case Code::unauthenticated:
      return 401;
    case Code::permission_denied:
      return 403;
    case Code::resource_exhausted:
      return 429;
  }
  return 500;
}

HttpResponse error_response(int status, const std::string& message) {
  return HttpResponse{status, "application/json", dump(nlohmann::json{{"error", message}}) + "\n"};
}

Outcome<AcquireInput> acquire_input(const std::string& name, const std::string& body) {
  auto parsed = parse_object(body);
  if (auto* f = std::get_if<Failure>(&parsed)) return *f;
  const nlohmann::json& j = std::get<nlohmann::json>(parsed);
  AcquireInput in;
  in.name = name;
  std::optional<std::int64_t> wait;
  for (auto bad :
       {read_int(j, "ttl_ms", in.ttl_ms), read_int(j, "wait_ms", wait),
        read_count(j, "permits", in.permits), read_owner(j, in.owner), read_mode(j, in.mode)}) {
    if (bad) return *bad;
  }
  in.wait_ms = wait.value_or(0);
  if (j.contains("fair") && !j["fair"].is_null()) {
    if (!j["fair"].is_boolean()) return Failure{Code::invalid_argument, "fair must be a boolean"};
    in.fair = j["fair"].get<bool>();
  }
  return in;
}

namespace {

Outcome<OwnerInput> owner_fields(const nlohmann::json& j) {
  OwnerInput in;
  for (auto bad : {read_owner(j, in.owner), read_int(j, "ttl_ms", in.ttl_ms), read_mode(j, in.mode),
                   read_count(j, "permit", in.permit)}) {
    if (bad) return *bad;
  }
  return in;
}

}  // namespace

Outcome<OwnerInput> owner_input(const std::string& body) {
  auto parsed = parse_object(body);
  if (auto* f = std::get_if<Failure>(&parsed)) return *f;
  return owner_fields(std::get<nlohmann::json>(parsed));
}

Outcome<std::vector<LeaseRenewal>> renew_input(const std::string& body) {
  auto parsed = parse_object(body);
  if (auto* f = std::get_if<Failure>(&parsed)) return *f;
  const nlohmann::json& j = std::get<nlohmann::json>(parsed);
  if (!j.contains("leases") || !j["leases"].is_array()) {
    return Failure{Code::invalid_argument, "leases must be a list"};
  }
  std::vector<LeaseRenewal> out;
  for (const nlohmann::json& lease : j["leases"]) {
    if (!lease.is_object() || !lease.contains("name") || !lease["name"].is_string()) {
      return Failure{Code::invalid_argument, "each lease must be an object with a name"};
    }
    auto in = owner_fields(lease);
    if (auto* f = std::get_if<Failure>(&in)) return *f;
    auto& owned = std::get<OwnerInput>(in);
    out.push_back(LeaseRenewal{
        HoldRef{lease["name"].get<std::string>(), std::move(owned.owner), owned.mode, owned.permit},
        owned.ttl_ms.value_or(0)});  // unset: refused by check_renewals, as for gRPC
  }
  if (auto bad = check_renewals(out)) return *bad;
  return out;
}

namespace {

// The guard's word on a call on `name` (none without a guard); `extend` checks its ttl too.
std::optional<Failure> guard_check(const HttpHandlers& handlers, const HttpRequest& request,
                                   const std::string& name, bool extend = false,
                                   std::optional<std::int64_t> ttl_ms = std::nullopt) {
  if (!handlers.guard) return std::nullopt;
  if (extend) return handlers.guard->check_extend(request.caller, name, ttl_ms);
  return handlers.guard->check(request.caller, name);
}

void acquire_route(const HttpHandlers& handlers, const Routed& r, const HttpRequest& request,
                   std::shared_ptr<PendingAcquire> pending,
                   std::function<void(HttpResponse)> done) {
  auto in = acquire_input(r.name, request.body);
  if (auto* f = std::get_if<Failure>(&in)) return done(failed(*f));
  AcquireInput& input = std::get<AcquireInput>(in);
  WaitCounter::Slot slot;
  if (handlers.guard) {
    auto admitted = handlers.guard->admit(request.caller, input);
    if (auto* refused = std::get_if<Failure>(&admitted)) return done(failed(*refused));
    slot = std::move(std::get<WaitCounter::Slot>(admitted));
  }
  std::function<void(Outcome<Grant>)> answer = [done, ops = handlers.ops, name = input.name,
                                                mode = input.mode,
                                                own = input.owner.empty()](Outcome<Grant> o) {
    if (auto* f = std::get_if<Failure>(&o)) return done(failed(*f));
    const Grant& g = std::get<Grant>(o);
    // The token as a decimal string: it can pass 2^53.
    nlohmann::json j{{"owner", g.owner},
                     {"fencing_token", std::to_string(g.fencing_token)},
                     {"validity_ms", g.validity_ms}};
    if (g.permit) j["permit"] = *g.permit;
    HttpResponse response = ok(j);
    // Only an owner this call made (Operations::release, operations.h, says why).
    if (own) {
      response.undelivered = [ops, hold = HoldRef{name, g.owner, mode, g.permit.value_or(0)}] {
        ops->release(hold, [](const Outcome<bool>&) {});
      };
    }
    done(std::move(response));
  };
  handlers.ops->acquire(std::move(input), std::move(pending),
                        holding(std::move(slot), std::move(answer)));
}

void handle_lock(const HttpHandlers& handlers, const Routed& r, const HttpRequest& request,
                 std::shared_ptr<PendingAcquire> pending, std::function<void(HttpResponse)> done) {
  Operations& ops = *handlers.ops;
  if (r.route == Route::acquire)
    return acquire_route(handlers, r, request, std::move(pending), done);
  if (r.route == Route::status) {
    if (auto refused = guard_check(handlers, request, r.name)) return done(failed(*refused));
    return ops.status(r.name, [done](Outcome<LockStatus> o) {
      if (auto* f = std::get_if<Failure>(&o)) return done(failed(*f));
      done(ok(cli::to_json(std::get<LockStatus>(o))));
    });
  }
  auto in = owner_input(request.body);
  if (auto* f = std::get_if<Failure>(&in)) return done(failed(*f));
  OwnerInput& owned = std::get<OwnerInput>(in);
  const bool extend = r.route == Route::extend;
  if (auto refused = guard_check(handlers, request, r.name, extend, owned.ttl_ms)) {
    return done(failed(*refused));
  }
  HoldRef hold{r.name, std::move(owned.owner), owned.mode, owned.permit};
  if (r.route == Route::extend) {
    return ops.extend(std::move(hold), owned.ttl_ms, [done](Outcome<std::int64_t> o) {
      if (auto* f = std::get_if<Failure>(&o)) return done(failed(*f));
      done(ok({{"validity_ms", std::get<std::int64_t>(o)}}));
    });
  }
  ops.release(std::move(hold), [done](Outcome<bool> o) {
    if (auto* f = std::get_if<Failure>(&o)) return done(failed(*f));
    done(ok(nlohmann::json::object()));
  });
}

// One renewal round over the leases named; 200 with each lease's outcome, in order.
// Each lease passes the guard as an Extend of it would, before any is renewed.
void handle_renew(const HttpHandlers& handlers, const HttpRequest& request,
                  std::function<void(HttpResponse)> done) {
  auto in = renew_input(request.body);
  if (auto* f = std::get_if<Failure>(&in)) return done(failed(*f));
  const auto& renewals = std::get<std::vector<LeaseRenewal>>(in);
  for (const LeaseRenewal& l : renewals) {
    if (auto refused = guard_check(handlers, request, l.hold.name, true, l.ttl_ms)) {
      return done(failed(*refused));
    }
  }
  renew_all(*handlers.ops, renewals, {}, [done](std::vector<Renewed> renewed) {
    nlohmann::json leases = nlohmann::json::array();
    for (const Renewed& r : renewed) {
      nlohmann::json lease{{"name", r.name}, {"owner", r.owner}, {"validity_ms", r.validity_ms}};
      if (!r.error.empty()) lease["error"] = r.error;
      leases.push_back(std::move(lease));
    }
    done(ok({{"leases", std::move(leases)}}));
  });
}

void dispatch(const HttpHandlers& handlers, const Routed& r, const HttpRequest& request,
              std::shared_ptr<PendingAcquire> pending, std::function<void(HttpResponse)> done) {
  if (r.route == Route::not_found) return done(error_response(404, "no such path"));
  if (!r.method_ok) return done(error_response(405, "method not allowed here"));
  // With tokens, a known one before anything else (/metrics too: it names the Redis nodes);
  // the probes stay open.
  const bool probe = r.route == Route::healthz || r.route == Route::readyz;
  if (handlers.guard && !probe) {
    if (auto refused = handlers.guard->check_token(request.caller)) return done(failed(*refused));
  }
  if (r.bad_encoding) return done(error_response(400, "bad percent-encoding in the name"));
  switch (r.route) {
    case Route::healthz:
      return done(HttpResponse{200, "text/plain", "ok\n"});
    case Route::readyz:
      return handlers.ready([done](bool ready) {
        done(ready ? HttpResponse{200, "text/plain", "ready\n"}
                   : HttpResponse{503, "text/plain", "no quorum of nodes answers\n"});
      });
    case Route::metrics:
      return done(HttpResponse{200, "text/plain; version=0.0.4", handlers.metrics()});
    case Route::renew:
      return handle_renew(handlers, request, std::move(done));
    default:
      return handle_lock(handlers, r, request, std::move(pending), std::move(done));
  }
}

}  // namespace

std::string endpoint_label(const Routed& r, std::string_view method) {
  if (!r.method_ok) return "other";
  switch (r.route) {
    case Route::acquire:
      return "POST /v1/locks/{name}:acquire";
    case Route::extend:
      return "POST /v1/locks/{name}:extend";
    case Route::release:
      return "POST /v1/locks/{name}:release";
    case Route::status:
      return "GET /v1/locks/{name}";
    case Route::renew:
      return "POST /v1/leases:renew";
    case Route::healthz:
      return std::string(method) + " /healthz";
    case Route::readyz:
      return std::string(method) + " /readyz";
    case Route::metrics:
      return std::string(method) + " /metrics";
    case Route::not_found:
      break;
  }
  return "other";
}

void handle(const HttpHandlers& handlers, const HttpRequest& request,
            std::shared_ptr<PendingAcquire> pending, std::function<void(HttpResponse)> done) {
  const Routed r = route(request.method, request.target);
  if (handlers.endpoints || handlers.access_log) {
    AccessEntry entry;
    entry.transport = "http";
    entry.method = endpoint_label(r, request.method);
    entry.name = r.name;
    entry.peer = request.caller.address;
    if (handlers.access_log && handlers.guard)
      entry.token = handlers.guard->token_id(request.caller);
    done = [done = std::move(done), metrics = handlers.endpoints, log = handlers.access_log,
            entry = std::move(entry),
            start = std::chrono::steady_clock::now()](HttpResponse response) mutable {
      entry.status = std::to_string(response.status);
      entry.duration = std::chrono::steady_clock::now() - start;
      if (metrics) metrics->record("http", entry.method, entry.status, entry.duration);
      if (log) log->write(entry);
      done(std::move(response));
    };
  }
  dispatch(handlers, r, request, std::move(pending), std::move(done));
}

}  // namespace dlock::service

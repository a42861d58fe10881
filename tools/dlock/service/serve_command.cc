// SPDX-License-Identifier: MIT
#include "service/serve_command.h"

#include <dlock/prometheus.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>

#include <charconv>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "exit_codes.h"
#include "service/endpoint_interceptor.h"
#include "service/grpc_service.h"
#include "service/grpc_tls.h"
#include "service/http_server.h"
#include "service/operations.h"
#include "service/reload.h"
#include "stop_signals.h"

namespace dlock::cli {

CLI::App* add_serve_command(CLI::App& app, ServeFlags& flags) {
  CLI::App* serve =
      app.add_subcommand("serve", "Serve locks over the network (gRPC) to clients in any language");
  add_connect_flags(*serve, flags.connect);
  // --tls-cert and --tls-key are the service's own certificate here (the service contract);
  // the Redis client certificate moves to --redis-tls-cert / --redis-tls-key.
  serve->remove_option(serve->get_option("--tls-cert"));
  serve->remove_option(serve->get_option("--tls-key"));
  serve
      ->add_option("--redis-tls-cert", flags.connect.tls_cert,
                   "client certificate file (PEM) for rediss:// nodes")
      ->envname("DLOCK_TLS_CERT");
  serve
      ->add_option("--redis-tls-key", flags.connect.tls_key,
                   "client private key file (PEM) for rediss:// nodes")
      ->envname("DLOCK_TLS_KEY");
  serve->add_option("--grpc-listen", flags.grpc_listen,
                    "HOST:PORT of the gRPC listener, or off (default 127.0.0.1:7700; port 0: any)");
  serve->add_option("--http-listen", flags.http_listen,
                    "HOST:PORT of the HTTP/JSON listener, or off (default 127.0.0.1:7701; port "
                    "0: any)");
  add_security_flags(*serve, flags.security);
  add_connection_flags(*serve, flags.connections);
  serve->footer(
      "Serves dlock.v1.Locks (proto/dlock/v1/lock.proto): Acquire, Extend, Release, Status, "
      "KeepAlive, Watch, with server reflection; and HTTP/JSON: POST /v1/locks/NAME:acquire, "
      ":extend, :release, GET /v1/locks/NAME, POST /v1/leases:renew, /healthz, /readyz, "
      "/metrics (with per-endpoint request counts and latencies). Prints `dlock serve: grpc "
      "HOST:PORT` and `dlock serve: http HOST:PORT` once it listens. Stops on SIGINT or SIGTERM: "
      "it stops accepting, waits in flight end with UNAVAILABLE (HTTP 503: the instance is "
      "stopping), watches and keep-alive streams end, other calls get 2 s; held locks stay held "
      "(they end with their "
      "ttl, or their owner extends or releases them through another instance). SIGHUP reads "
      "--tokens and the TLS files again (a bad file keeps the previous ones). See "
      "docs/service.md.\n"
      "Exit status: 0 stopped by a signal; 64 usage error; 69 a listener could not be opened.\n\n"
      "Examples:\n"
      "  dlock serve -r redis://10.0.0.1:6379 -r redis://10.0.0.2:6379 -r redis://10.0.0.3:6379\n"
      "  dlock serve --grpc-listen 0.0.0.0:7700 --http-listen off");
  return serve;
}

Result<std::string> listen_address(const std::string& flag) {
  if (flag == "off") return std::string();
  const auto colon = flag.rfind(':');
  const bool bracketed = !flag.empty() && flag.front() == '[';
  const bool host_ok = colon != std::string::npos && colon > 0 &&
                       (!bracketed || flag[colon - 1] == ']') &&
                       (bracketed || flag.find(':') == colon);
  unsigned port = 0;
  const char* first = flag.data() + (colon == std::string::npos ? 0 : colon + 1);
  const char* last = flag.data() + flag.size();
  const auto [end, ec] = std::from_chars(first, last, port);
  if (!host_ok || first == last || ec != std::errc() || end != last || port > 65535) {
    return Error(errc::invalid_argument,
                 "listen address '" + flag + "': expected HOST:PORT (or [IPv6]:PORT, or off)");
  }
  return flag;
}

namespace {

std::string host_of(const std::string& address) {
  return address.substr(0, address.rfind(':'));
}

// What the gRPC listener is given besides its service.
struct GrpcSetup {
  service::GrpcTls* tls = nullptr;  // its credentials: in the clear, or TLS reloaded on SIGHUP
  service::EndpointMetrics* endpoints = nullptr;
  service::AccessLog* access_log = nullptr;
  const service::Guard* guard = nullptr;
  service::HttpLimits limits;
};

std::unique_ptr<grpc::Server> start_grpc(const std::string& address, service::GrpcLocks& locks,
                                         const GrpcSetup& setup) {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second dlock serve on the same port would then share
  // it silently instead of failing.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // The same bound as an HTTP body: a larger request is refused (RESOURCE_EXHAUSTED, by gRPC).
  builder.SetMaxReceiveMessageSize(static_cast<int>(service::kMaxBody));
  grpc_limits(builder, setup.limits);
  int port = 0;
  builder.AddListeningPort(address, setup.tls->credentials(), &port);
  builder.RegisterService(&locks);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counting;
  counting.push_back(
      service::endpoint_interceptor(*setup.endpoints, setup.access_log, setup.guard));
  builder.experimental().SetInterceptorCreators(std::move(counting));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "dlock: cannot listen on " << address << " for gRPC\n";
    return nullptr;
  }
  std::cout << "dlock serve: grpc " << host_of(address) << ":" << port << std::endl;
  return server;
}

// /readyz: ready when a quorum of nodes answers and may vote (not quarantined, not a replica
// or an evicting server), as an acquisition would need.
void check_ready(service::Operations& ops, std::function<void(bool)> done) {
  ops.status("dlock:readyz", [done](service::Outcome<LockStatus> outcome) {
    const auto* status = std::get_if<LockStatus>(&outcome);
    if (status == nullptr) return done(false);
    std::size_t voting = 0;
    for (const NodeLockState& n : status->nodes) {
      if (!n.error && n.quarantine.count() == 0 && n.never_votes.empty()) ++voting;
    }
    done(voting >= status->quorum);
  });
}

struct Listeners {
  std::string grpc;  // empty: off
  std::string http;
};

Result<Listeners> listeners(const ServeFlags& flags) {
  auto grpc_address = listen_address(flags.grpc_listen);
  if (!grpc_address) return grpc_address.error();
  auto http_address = listen_address(flags.http_listen);
  if (!http_address) return http_address.error();
  if (grpc_address->empty() && http_address->empty()) {
    return Error(errc::invalid_argument, "no listener: --grpc-listen and --http-listen are off");
  }
  return Listeners{*grpc_address, *http_address};
}

// Serves until SIGINT or SIGTERM; SIGHUP reloads. Returns the signal that stops it.
int serve_until_stopped(StopSignals& signals, Reloader& reloader) {
  for (;;) {
    const int sig = signals.wait_for(std::chrono::milliseconds(200));
    if (sig == SIGHUP) {
      reloader.reload();
    } else if (sig != 0) {
      return sig;
    }
  }
}

// SIGTERM: no new connection or call; every wait in flight ends with UNAVAILABLE (the instance
// is stopping) while its connection can still carry the answer; watches and keep-alive
// streams end (UNAVAILABLE); other calls get gRPC's 2 s, HTTP answers the same 2 s; then
// everything closes. Leases stay.
void stop_serving(service::Operations& ops, service::GrpcLocks& locks, grpc::Server* grpc_server,
                  service::HttpServer& http) {
  ops.stop_waits();
  // Both listeners stop accepting at once, and their 2 s run side by side, not one after the
  // other.
  std::thread http_stop([&http] { http.stop(); });
  if (grpc_server) {
    locks.stop_watches();  // they would never end by themselves
    locks.stop_keepalives();
    grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  http_stop.join();
}

// What serve_command reads before it starts anything; a usage error says which flag.
struct Setup {
  Listeners addresses;
  service::HttpLimits limits;
  std::shared_ptr<service::AccessLog> access_log;  // null: off
};

Result<Setup> setup_of(const ServeFlags& flags) {
  auto addresses = listeners(flags);
  if (!addresses) return addresses.error();
  auto limits = http_limits_of(flags.connections);
  if (!limits) return limits.error();
  std::shared_ptr<service::AccessLog> log;
  if (!flags.connections.access_log.empty()) {
    auto opened = service::AccessLog::open(flags.connections.access_log);
    if (!opened) return opened.error();
    log = std::move(*opened);
  }
  return Setup{*addresses, *limits, std::move(log)};
}

}  // namespace

int serve_command(const ServeFlags& flags) {
  // Before any thread starts (the client's, gRPC's): they inherit the blocked signals.
  StopSignals signals;
  auto setup = setup_of(flags);
  auto guard = make_guard(flags.security);
  auto tls = load_tls(flags.security);
  for (const Error* bad : {setup ? nullptr : &setup.error(), guard ? nullptr : &guard.error(),
                           tls ? nullptr : &tls.error()}) {
    if (bad == nullptr) continue;
    std::cerr << "dlock: " << bad->message() << "\n";
    return kExitUsage;
  }
  auto metrics = std::make_shared<PrometheusObserver>();
  auto client = make_client(flags.connect, metrics);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  Reloader reloader(flags.security, *guard, *tls);
  // Before the gRPC server, which asks it for the newest certificate at each handshake.
  service::GrpcTls grpc_tls([&reloader] { return reloader.tls(); });
  service::EndpointMetrics endpoints;  // before the servers that record in it
  service::Operations ops(*client, 4);
  service::GrpcLocks locks(ops, *guard);
  std::unique_ptr<grpc::Server> grpc_server;
  const GrpcSetup grpc_setup{&grpc_tls, &endpoints, setup->access_log.get(), &*guard,
                             setup->limits};
  if (!setup->addresses.grpc.empty() &&
      !(grpc_server = start_grpc(setup->addresses.grpc, locks, grpc_setup))) {
    return kExitUnavailable;
  }
  service::HttpHandlers handlers{
      &ops,
      &*guard,
      [&ops](auto done) { check_ready(ops, std::move(done)); },
      [metrics, &endpoints] { return metrics->text() + endpoints.text(); },
      &endpoints,
      setup->access_log.get()};
  service::HttpServer http(std::move(handlers), reloader.http_tls(), setup->limits);
  if (!setup->addresses.http.empty()) {
    auto port = http.start(setup->addresses.http);
    if (!port) {
      std::cerr << "dlock: " << port.error().message() << "\n";
      return kExitUnavailable;
    }
    std::cout << "dlock serve: http " << host_of(setup->addresses.http) << ":" << *port
              << std::endl;
  }
  serve_until_stopped(signals, reloader);
  stop_serving(ops, locks, grpc_server.get(), http);
  return kExitOk;
}

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
#include "service/serve_command.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>

#include <charconv>
#include <iostream>
#include <memory>

#include "exit_codes.h"
#include "service/grpc_service.h"
#include "service/operations.h"
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
  serve
      ->add_option("--http-listen", flags.http_listen,
                   "HOST:PORT of the HTTP/JSON listener, or off (not served yet)")
      ->each([&flags](const std::string&) { flags.http_listen_given = true; });
  serve->add_option("--tls-cert", flags.tls_cert, "the service's certificate (not served yet)");
  serve->add_option("--tls-key", flags.tls_key, "the service's private key (not served yet)");
  serve->add_option("--tls-client-ca", flags.tls_client_ca,
                    "require client certificates signed by this CA (not served yet)");
  serve->add_option("--tokens", flags.tokens,
                    "bearer tokens and their name prefixes (not served yet)");
  serve->footer(
      "Serves dlock.v1.Locks (proto/dlock/v1/lock.proto): Acquire, Extend, Release, Status, "
      "with server reflection. Prints `dlock serve: grpc HOST:PORT` once it listens. Stops on "
      "SIGINT or SIGTERM: waits in flight end with CANCELLED; held locks stay held (they end "
      "with their ttl, or their owner extends or releases them through another instance). See "
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

// The flags this slice accepts but does not serve: refusing to start is safer than serving
// without the TLS or the tokens that the operator asked for.
std::optional<std::string> not_served_yet(const ServeFlags& flags) {
  if (!flags.tls_cert.empty() || !flags.tls_key.empty() || !flags.tls_client_ca.empty()) {
    return "--tls-cert, --tls-key and --tls-client-ca are not served yet (issue 31)";
  }
  if (!flags.tokens.empty()) return "--tokens is not served yet (issue 31)";
  if (flags.http_listen_given && flags.http_listen != "off") {
    return "the HTTP/JSON listener is not served yet (issue 31): give --http-listen off";
  }
  return std::nullopt;
}

int run_grpc(const std::string& address, service::Operations& ops, StopSignals& signals) {
  service::GrpcLocks locks(ops);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&locks);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "dlock: cannot listen on " << address << " for gRPC\n";
    return kExitUnavailable;
  }
  const std::string host = address.substr(0, address.rfind(':'));
  std::cout << "dlock serve: grpc " << host << ":" << port << std::endl;
  while (signals.wait_for(std::chrono::milliseconds(200)) == 0) {
  }
  // Calls in flight get a moment to finish; waits still running are then cancelled (their
  // callers see CANCELLED, and nothing of the wait stays on the nodes).
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return kExitOk;
}

}  // namespace

int serve_command(const ServeFlags& flags) {
  // Before any thread starts (the client's, gRPC's): they inherit the blocked signals.
  StopSignals signals;
  if (auto why = not_served_yet(flags)) {
    std::cerr << "dlock: " << *why << "\n";
    return kExitUsage;
  }
  auto grpc_address = listen_address(flags.grpc_listen);
  if (!grpc_address) {
    std::cerr << "dlock: " << grpc_address.error().message() << "\n";
    return kExitUsage;
  }
  if (grpc_address->empty()) {
    std::cerr << "dlock: no listener: --grpc-listen is off (and HTTP is not served yet)\n";
    return kExitUsage;
  }
  auto client = make_client(flags.connect);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  if (!flags.http_listen_given) {
    std::cerr << "dlock: note: the HTTP/JSON listener is not served yet (issue 31)\n";
  }
  service::Operations ops(*client, 4);
  return run_grpc(*grpc_address, ops, signals);
}

}  // namespace dlock::cli

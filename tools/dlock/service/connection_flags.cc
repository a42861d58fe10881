// SPDX-License-Identifier: MIT
#include "service/connection_flags.h"

#include "duration.h"

namespace dlock::cli {

void add_connection_flags(CLI::App& serve, ConnectionFlags& flags) {
  serve.add_option("--http-max-connections", flags.http_max_connections,
                   "HTTP connections open at once; one more is answered 503 with Retry-After "
                   "(under TLS: closed) and logged (default 1024)");
  serve.add_option("--idle-timeout", flags.idle_timeout,
                   "how long a client may take to complete the TLS handshake and each request "
                   "(HTTP: also between kept-alive requests) before it is disconnected (default "
                   "10s)");
  serve.add_option("--access-log", flags.access_log,
                   "FILE (appended to), or - for stderr: one JSON line per call (default: off)");
}

Result<service::HttpLimits> http_limits_of(const ConnectionFlags& flags) {
  service::HttpLimits limits;
  if (flags.http_max_connections == 0) {
    return Error(errc::invalid_argument, "--http-max-connections must be positive");
  }
  auto idle = parse_duration(flags.idle_timeout);
  if (!idle) return Error(errc::invalid_argument, "--idle-timeout: " + idle.error().message());
  if (idle->count() <= 0) {
    return Error(errc::invalid_argument,
                 "--idle-timeout must be positive, got " + flags.idle_timeout);
  }
  limits.max_connections = flags.http_max_connections;
  limits.idle_timeout = *idle;
  return limits;
}

void grpc_limits(grpc::ServerBuilder& builder, const service::HttpLimits& limits) {
  const auto ms = [](auto d) {
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  };
  // A client that connects and never finishes its handshake (TLS, HTTP/2's preface) is cut.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, ms(limits.idle_timeout));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kGrpcMaxStreams);
  // A connection with no call in flight is sent GOAWAY after this (its client reconnects on its
  // next call): idle connections do not pile up. Not the idle timeout itself: reconnecting
  // every 10 s would cost clients a handshake for nothing.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ms(kGrpcMaxIdle));
  // Pings every minute on a connection, so one whose peer vanished (no FIN) is closed, and
  // its streams (a keep-alive, a watch) end, within a minute and 20 s.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
}

}  // namespace dlock::cli

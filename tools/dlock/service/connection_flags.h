// SPDX-License-Identifier: MIT
// `dlock serve`'s connection bounds and access log flags (docs/service.md, "Connections"):
// how many HTTP connections at once, how long a client may take to handshake and send a
// request, and where the access log goes. The gRPC listener gets the equivalents that
// grpc::ServerBuilder offers (grpc_limits()).
#pragma once

#include <dlock/result.h>
#include <grpcpp/server_builder.h>

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "service/http_server.h"

namespace dlock::cli {

struct ConnectionFlags {
  std::size_t http_max_connections = service::HttpLimits{}.max_connections;
  std::string idle_timeout = "10s";
  std::string access_log;  // "": off; "-": stderr
};

void add_connection_flags(CLI::App& serve, ConnectionFlags& flags);

// The HTTP bounds of the flags. Errors: invalid_argument (0, a bad duration).
Result<service::HttpLimits> http_limits_of(const ConnectionFlags& flags);

// What gRPC can bound of the same: the TLS handshake within the idle timeout, streams per
// connection, a connection without calls closed after kGrpcMaxIdle, keep-alive pings that
// find dead peers. gRPC 1.51 has no limit on the number of connections.
void grpc_limits(grpc::ServerBuilder& builder, const service::HttpLimits& limits);

// The concurrent calls (streams) one gRPC connection may have: a wait is a call, and a
// token's waits are bounded by --max-waits (256 by default) already.
inline constexpr int kGrpcMaxStreams = 1024;
inline constexpr std::chrono::minutes kGrpcMaxIdle{5};

}  // namespace dlock::cli

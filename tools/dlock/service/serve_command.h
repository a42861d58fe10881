// SPDX-License-Identifier: MIT
// `dlock serve`: the lock service (docs/service.md) in front of the configured Redis nodes.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "connect_flags.h"
#include "service/connection_flags.h"
#include "service/security_flags.h"

namespace dlock::cli {

struct ServeFlags {
  ConnectFlags connect;
  std::string grpc_listen = "127.0.0.1:7700";  // HOST:PORT, or off
  std::string http_listen = "127.0.0.1:7701";  // HOST:PORT, or off
  SecurityFlags security;                      // TLS, tokens, limits
  ConnectionFlags connections;                 // connection bounds, access log
};

CLI::App* add_serve_command(CLI::App& app, ServeFlags& flags);
// Runs until SIGINT or SIGTERM; SIGHUP reads the token and TLS files again (reload.h). Exit 0 after
// a clean stop, 64 for bad flags, 69 when a listener cannot be opened.
int serve_command(const ServeFlags& flags);

// A listener flag: "off" gives "" (no listener); HOST:PORT (PORT 0: any free port; HOST may be
// [IPv6]) gives itself. Errors: invalid_argument. Pure, for tests.
Result<std::string> listen_address(const std::string& flag);

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// `dlock sandbox`: local redis-server nodes until Ctrl-C.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace dlock::cli {

struct SandboxFlags {
  std::size_t nodes = 0;  // 0: 3 servers, or 1 cluster or sentinel set
  std::uint16_t port = 0;
  bool persist = false;
  bool cluster = false;   // each node a Redis Cluster
  bool sentinel = false;  // each node a master with replicas, watched by sentinels
  std::size_t masters = 3;
  std::size_t replicas = 1;
  bool service = false;  // a `dlock serve` in front of the nodes too
  std::string grpc_listen = "127.0.0.1:7700";
  std::string http_listen = "127.0.0.1:7701";
};

CLI::App* add_sandbox_command(CLI::App& app, SandboxFlags& flags);
int sandbox_command(SandboxFlags flags);

}  // namespace dlock::cli

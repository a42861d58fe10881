// SPDX-License-Identifier: MIT
// Flags every subcommand shares: which nodes, TLS files, timeouts; and the Client built from them.
#pragma once

#include <dlock/client.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace dlock::cli {

struct ConnectFlags {
  std::vector<std::string> redis;  // -r, repeated; else DLOCK_REDIS; else the local default
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string node_timeout = "200ms";
};

void add_connect_flags(CLI::App& app, ConnectFlags& flags);

// The node URLs: -r flags, else DLOCK_REDIS (comma-separated), else redis://127.0.0.1:6379.
std::vector<std::string> node_urls(const ConnectFlags& flags);

// Errors are configuration errors (exit 64).
Result<Client> make_client(const ConnectFlags& flags);

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// Flags every subcommand shares: which nodes, TLS files, timeouts; and the Client built from them.
#pragma once

#include <dlock/client.h>
#include <dlock/observer.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

namespace dlock::cli {

struct ConnectFlags {
  std::vector<std::string> redis;  // -r, repeated; else --redis-file; else DLOCK_REDIS; else local
  std::string redis_file;          // node URLs from a file, so no password shows in ps
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string node_timeout = "200ms";
  bool allow_eviction = false;     // nodes whose maxmemory-policy may evict lock keys still vote
  bool start_from_quorum = false;  // a brand-new lock set starts once a quorum answers
};

void add_connect_flags(CLI::App& app, ConnectFlags& flags);

// The node URLs: -r flags, else --redis-file (one or more per line, comma-separated, # starts
// a comment), else DLOCK_REDIS (comma-separated), else redis://127.0.0.1:6379. Errors: an
// unreadable or empty file (errc::invalid_argument). Warns on stderr when a password is on the
// command line (-r) or in a file other users can read.
Result<std::vector<std::string>> node_urls(const ConnectFlags& flags);

// Errors are configuration errors (exit 64). `observer` (may be null) sees the client's work.
Result<Client> make_client(const ConnectFlags& flags, std::shared_ptr<Observer> observer = {});

}  // namespace dlock::cli

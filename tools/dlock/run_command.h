// SPDX-License-Identifier: MIT
// `dlock run`: hold a lock while a command runs, renewing it, then release it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "connect_flags.h"
#include "replica_flags.h"

namespace dlock::cli {

struct RunFlags {
  ConnectFlags connect;
  std::string ttl = "30s";
  std::string wait = "0";
  std::string kill_after = "10s";  // after a lost lock: from SIGTERM to SIGKILL
  int conflict_exit_code = 75;     // -E: the status when someone else holds the lock
  bool fair = false;
  ReplicaFlags replicas;
  bool shared = false;                       // --shared: a read lock (many readers or one writer)
  std::size_t permits = 0;                   // -n: one of N permits of a semaphore (0: a lock)
  std::optional<std::string> shell_command;  // -c: run by /bin/sh -c instead of `command`
  std::string name;
  std::vector<std::string> command;
};

CLI::App* add_run_command(CLI::App& app, RunFlags& flags);
// Returns the process exit status (see exit_codes.h).
int run_command(const RunFlags& flags);

}  // namespace dlock::cli

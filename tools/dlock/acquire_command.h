// SPDX-License-Identifier: MIT
// `dlock acquire NAME`: take a lock and keep it after dlock exits, for shell scripts that lock
// across steps; the owner token it prints releases it (`dlock release NAME --owner T`).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "connect_flags.h"
#include "replica_flags.h"

namespace dlock::cli {

struct AcquireFlags {
  ConnectFlags connect;
  std::string ttl = "5m";
  std::string wait = "0";
  int conflict_exit_code = 75;
  bool fair = false;
  ReplicaFlags replicas;
  bool json = false;
  std::string owner;  // empty: a new random one
  std::string name;
};

CLI::App* add_acquire_command(CLI::App& app, AcquireFlags& flags);
int acquire_command(const AcquireFlags& flags);

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// `dlock status`: what each node knows about a lock, as a table or as JSON.
#pragma once

#include <dlock/status.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "connect_flags.h"

namespace dlock::cli {

struct StatusFlags {
  ConnectFlags connect;
  bool json = false;
  std::size_t permits = 0;  // -n: the N slots of the semaphore NAME
  std::string name;
};

CLI::App* add_status_command(CLI::App& app, StatusFlags& flags);
// Exit 0 when a quorum of nodes answered, 69 when not, 64 for bad flags.
int status_command(const StatusFlags& flags);

// The object `dlock status --json` prints (also the lock service's GET /v1/locks/{name}).
nlohmann::json to_json(const LockStatus& s);

}  // namespace dlock::cli

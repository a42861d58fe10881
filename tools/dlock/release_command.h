// SPDX-License-Identifier: MIT
// `dlock release NAME --owner T`: gives back a lock taken by `dlock acquire` (or any holder
// that names its owner). `dlock release --force NAME`: an operator clears a stuck lock on all
// nodes, whoever holds it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <optional>
#include <string>

#include "connect_flags.h"

namespace dlock::cli {

struct ReleaseFlags {
  ConnectFlags connect;
  bool force = false;
  bool yes = false;
  bool foreign = false;
  std::optional<std::string> owner;  // --owner, else $DLOCK_OWNER
  std::size_t permits = 0;           // -n with --force: every slot of the semaphore NAME
  std::string name;
};

CLI::App* add_release_command(CLI::App& app, ReleaseFlags& flags);
int release_command(const ReleaseFlags& flags);

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// `dlock release --force NAME`: an operator clears a stuck lock on all nodes.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "connect_flags.h"

namespace dlock::cli {

struct ReleaseFlags {
  ConnectFlags connect;
  bool force = false;
  bool yes = false;
  bool foreign = false;
  std::string name;
};

CLI::App* add_release_command(CLI::App& app, ReleaseFlags& flags);
int release_command(const ReleaseFlags& flags);

}  // namespace dlock::cli

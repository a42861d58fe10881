// SPDX-License-Identifier: MIT
// `dlock watch NAME`: prints a line each time the holder of a lock changes; with --stats, also
// a line of counts every period (watch_stats.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "connect_flags.h"

namespace dlock::cli {

struct WatchFlags {
  ConnectFlags connect;
  std::string interval = "200ms";
  int changes = 0;  // stop after this many changes (0: until interrupted)
  bool stats = false;
  std::string stats_every = "1s";
  std::string name;
};

CLI::App* add_watch_command(CLI::App& app, WatchFlags& flags);
int watch_command(const WatchFlags& flags);

}  // namespace dlock::cli

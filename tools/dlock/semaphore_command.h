// SPDX-License-Identifier: MIT
// `dlock semaphore resize NAME N`: changes the permit count of a semaphore (dlock run -n). The
// nodes record a semaphore's count at its first acquisition and refuse runs that name another
// one, so changing it is this explicit step (Client::resize_semaphore has the rules).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "connect_flags.h"

namespace dlock::cli {

struct SemaphoreFlags {
  ConnectFlags connect;
  std::string name;
  std::size_t permits = 0;
};

// Adds `semaphore` with its one subcommand `resize`; returns `resize`.
CLI::App* add_semaphore_command(CLI::App& app, SemaphoreFlags& flags);
int semaphore_resize_command(const SemaphoreFlags& flags);

}  // namespace dlock::cli

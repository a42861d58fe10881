// SPDX-License-Identifier: MIT
// `dlock sandbox`: local redis-server nodes until Ctrl-C.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace dlock::cli {

struct SandboxFlags {
  std::size_t nodes = 3;
  std::uint16_t port = 0;
  bool persist = false;
};

CLI::App* add_sandbox_command(CLI::App& app, SandboxFlags& flags);
int sandbox_command(const SandboxFlags& flags);

}  // namespace dlock::cli

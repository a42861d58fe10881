// SPDX-License-Identifier: MIT
// `dlock demo`: dlock at work on a local 5-node sandbox, with faults, in under a minute.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace dlock::cli {

struct DemoFlags {
  int workers = 8;
  std::string duration = "20s";
  std::string ttl = "1s";
};

// The hidden worker the demo starts in each of its processes.
struct DemoWorkerFlags {
  std::string resource;  // URL of the Redis node that holds the shared counter
  std::string ttl = "1s";
  int id = 0;
};

CLI::App* add_demo_command(CLI::App& app, DemoFlags& flags);
CLI::App* add_demo_worker_command(CLI::App& app, DemoWorkerFlags& flags);
int demo_command(const DemoFlags& flags);
int demo_worker_command(const DemoWorkerFlags& flags);

}  // namespace dlock::cli

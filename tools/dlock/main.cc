// SPDX-License-Identifier: MIT
// dlock: the command-line tool. One file per subcommand; this one only dispatches.
#include <algorithm>
#include <csignal>
#include <iostream>

#include "exit_codes.h"
#include "run_command.h"
#include "status_command.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe is an error to report, not a reason to die
  CLI::App app{"dlock: distributed locks on Redis (single node or Redlock over N nodes)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dlock 0.1.0");
  dlock::cli::RunFlags run_flags;
  dlock::cli::StatusFlags status_flags;
  CLI::App* run = dlock::cli::add_run_command(app, run_flags);
  CLI::App* status = dlock::cli::add_status_command(app, status_flags);
  // Everything after the first "--" is the command of `dlock run`, passed on untouched; CLI11
  // parses only what comes before it.
  std::vector<std::string> args(argv + 1, argv + argc);
  if (auto dashes = std::find(args.begin(), args.end(), "--"); dashes != args.end()) {
    run_flags.command.assign(dashes + 1, args.end());
    args.erase(dashes, args.end());
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector in reverse order
  try {
    app.parse(args);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return dlock::cli::kExitUsage;
  }
  if (run->parsed()) return dlock::cli::run_command(run_flags);
  if (status->parsed()) return dlock::cli::status_command(status_flags);
  return dlock::cli::kExitUsage;
}

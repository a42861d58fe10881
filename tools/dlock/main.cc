// SPDX-License-Identifier: MIT
// dlock: the command-line tool. One file per subcommand; this one only dispatches.
#include <dlock/version.h>

#include <algorithm>
#include <csignal>
#include <iostream>

#include "acquire_command.h"
#include "demo_command.h"
#include "exit_codes.h"
#include "release_command.h"
#include "run_command.h"
#include "sandbox_command.h"
#include "semaphore_command.h"
#ifdef DLOCK_HAVE_SERVICE
#include "service/serve_command.h"
#endif
#include "status_command.h"
#include "watch_command.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe is an error to report, not a reason to die
  CLI::App app{"dlock: distributed locks on Redis (single node or Redlock over N nodes)", "dlock"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dlock " DLOCK_VERSION_STRING);
  namespace cli = dlock::cli;
  cli::RunFlags run_flags;
  cli::AcquireFlags acquire_flags;
  cli::StatusFlags status_flags;
  cli::ReleaseFlags release_flags;
  cli::WatchFlags watch_flags;
  cli::SandboxFlags sandbox_flags;
  cli::DemoFlags demo_flags;
  cli::DemoWorkerFlags worker_flags;
  cli::SemaphoreFlags semaphore_flags;
  CLI::App* run = cli::add_run_command(app, run_flags);
  CLI::App* acquire = cli::add_acquire_command(app, acquire_flags);
  CLI::App* status = cli::add_status_command(app, status_flags);
  CLI::App* release = cli::add_release_command(app, release_flags);
  CLI::App* watch = cli::add_watch_command(app, watch_flags);
  CLI::App* sandbox = cli::add_sandbox_command(app, sandbox_flags);
  CLI::App* demo = cli::add_demo_command(app, demo_flags);
  CLI::App* worker = cli::add_demo_worker_command(app, worker_flags);
  CLI::App* resize = cli::add_semaphore_command(app, semaphore_flags);
#ifdef DLOCK_HAVE_SERVICE
  cli::ServeFlags serve_flags;
  CLI::App* serve = cli::add_serve_command(app, serve_flags);
#endif
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
  if (run->parsed()) return cli::run_command(run_flags);
  if (acquire->parsed()) return cli::acquire_command(acquire_flags);
  if (status->parsed()) return cli::status_command(status_flags);
  if (release->parsed()) return cli::release_command(release_flags);
  if (watch->parsed()) return cli::watch_command(watch_flags);
  if (sandbox->parsed()) return cli::sandbox_command(sandbox_flags);
  if (demo->parsed()) return cli::demo_command(demo_flags);
  if (worker->parsed()) return cli::demo_worker_command(worker_flags);
  if (resize->parsed()) return cli::semaphore_resize_command(semaphore_flags);
#ifdef DLOCK_HAVE_SERVICE
  if (serve->parsed()) return cli::serve_command(serve_flags);
#endif
  return cli::kExitUsage;
}

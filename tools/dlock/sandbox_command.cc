// SPDX-License-Identifier: MIT
#include "sandbox_command.h"

#include <iostream>

#include "exit_codes.h"
#include "sandbox.h"
#include "stop_signals.h"

namespace dlock::cli {

CLI::App* add_sandbox_command(CLI::App& app, SandboxFlags& flags) {
  CLI::App* sandbox = app.add_subcommand(
      "sandbox", "Start local redis-server nodes to try dlock with (until Ctrl-C)");
  sandbox->add_option("-n,--nodes", flags.nodes, "how many nodes (default 3)");
  sandbox->add_option("-p,--port", flags.port,
                      "first port; the others follow (default: free ports)");
  sandbox->add_flag("--persist", flags.persist, "append-only file, fsync always (default: none)");
  sandbox->footer(
      "Prints a DLOCK_REDIS=... line for the nodes; stops them on Ctrl-C or SIGTERM and leaves "
      "no process and no file behind.\n"
      "Exit status: 0 after a clean stop, 69 if the nodes could not start (no redis-server, a "
      "port in use), 64 usage error.\n\n"
      "Examples:\n"
      "  dlock sandbox --nodes 5\n"
      "  export DLOCK_REDIS=...   # the printed line, in another terminal\n"
      "  dlock run my-job -- ./job.sh");
  return sandbox;
}

int sandbox_command(const SandboxFlags& flags) {
  if (flags.nodes == 0 || flags.nodes > 99) {
    std::cerr << "dlock: --nodes must be between 1 and 99\n";
    return kExitUsage;
  }
  StopSignals stop;
  auto sandbox = Sandbox::start(flags.nodes, flags.port, flags.persist);
  if (!sandbox) {
    std::cerr << "dlock: " << sandbox.error().message() << "\n";
    return kExitUnavailable;
  }
  std::cout << "DLOCK_REDIS=" << (*sandbox)->url_list() << std::endl;
  std::cerr << "dlock: " << (*sandbox)->size()
            << " nodes up; export the line above to use them. Ctrl-C stops them." << std::endl;
  while (stop.wait_for(std::chrono::seconds(3600)) == 0) {
  }
  sandbox->reset();
  std::cerr << "dlock: sandbox stopped" << std::endl;
  return kExitOk;
}

}  // namespace dlock::cli

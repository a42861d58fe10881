// SPDX-License-Identifier: MIT
#include "semaphore_command.h"

#include <iostream>

#include "exit_codes.h"

namespace dlock::cli {

CLI::App* add_semaphore_command(CLI::App& app, SemaphoreFlags& flags) {
  CLI::App* semaphore =
      app.add_subcommand("semaphore", "Manage a semaphore (the permits of dlock run -n)");
  semaphore->require_subcommand(1);
  // The node flags belong to `semaphore`, so they may come before or after `resize`
  // (fallthrough: resize passes the options it does not know to its parent).
  add_connect_flags(*semaphore, flags.connect);
  CLI::App* resize = semaphore->add_subcommand("resize", "Change a semaphore's permit count");
  resize->fallthrough();
  resize->add_option("name", flags.name, "semaphore name (as given to dlock run -n N NAME)")
      ->required();
  resize->add_option("permits", flags.permits, "the new permit count (1 to 1024)")->required();
  resize->footer(
      "The first acquisition of a semaphore records its permit count on the nodes; a run that "
      "names another count is refused (exit 64) while any permit is held, and the record goes "
      "with the last permit. resize changes the recorded count: growing is always allowed; "
      "shrinking to N only while no permit numbered N or above is held (nothing changes "
      "otherwise). Runs with the old count are refused afterwards.\n"
      "The node flags (-r URL, --redis-file, TLS, timeouts: dlock semaphore --help) go before "
      "or after `resize`.\n"
      "Exit status: 0 resized (or no permit held: nothing recorded, the next run sets the "
      "count), 75 a permit above the new count is held, 69 a node did not answer (it keeps the "
      "old count: run it again), 64 usage error.\n\n"
      "Examples:\n"
      "  dlock semaphore resize downloads 8");
  return resize;
}

int semaphore_resize_command(const SemaphoreFlags& flags) {
  auto client = make_client(flags.connect);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  auto resized = client->resize_semaphore(flags.name, flags.permits);
  if (!resized) {
    std::cerr << "dlock: " << resized.error().message() << "\n";
    return exit_for(resized.error(), kExitNotAcquired);
  }
  if (*resized == 0) {
    std::cout << "semaphore '" << flags.name << "': no permit is held, nothing recorded; the "
              << "next acquisition sets the count\n";
  } else {
    std::cout << "semaphore '" << flags.name << "': " << *resized << " -> " << flags.permits
              << " permits\n";
  }
  return kExitOk;
}

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
#include "acquire_command.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "duration.h"
#include "exit_codes.h"

namespace dlock::cli {

CLI::App* add_acquire_command(CLI::App& app, AcquireFlags& flags) {
  CLI::App* acquire = app.add_subcommand(
      "acquire",
      "Take a lock and keep it after dlock exits; print the owner token that releases it");
  add_connect_flags(*acquire, flags.connect);
  acquire
      ->add_option("-t,--ttl", flags.ttl,
                   "how long the lock lives unless released first; nothing renews it "
                   "(default 5m)")
      ->envname("DLOCK_TTL");
  acquire
      ->add_option("-w,--wait", flags.wait,
                   "how long to wait for a lock held by someone else (default 0: try once)")
      ->envname("DLOCK_WAIT");
  acquire
      ->add_option("-E,--conflict-exit-code", flags.conflict_exit_code,
                   "exit status when the lock is held by someone else past --wait (default 75)")
      ->check(CLI::Range(0, 255));
  acquire->add_flag("--fair", flags.fair, "wait in a FIFO queue (as dlock run --fair)");
  acquire->add_option("--owner", flags.owner,
                      "the owner token to hold it as (default: a new random one); it must be "
                      "unique among contenders");
  acquire->add_flag("--json", flags.json,
                    "print {name, owner, fence, validity_ms} instead of the owner token alone");
  acquire->add_option("name", flags.name, "lock name")->required();
  acquire->footer(
      "Prints the owner token (only it, one line) on success. The lock is held until "
      "`dlock release NAME --owner TOKEN` or until its ttl ends, whichever comes first: pick a "
      "ttl longer than the steps it guards. Nothing renews it, and it is not tied to any "
      "process.\n"
      "Exit status: 0 acquired; 75 (or -E's) held by someone else past --wait; 69 no quorum of "
      "nodes; 64 usage error.\n\n"
      "Examples:\n"
      "  owner=$(dlock acquire -t 10m deploy) || exit\n"
      "  ./step1.sh && ./step2.sh\n"
      "  dlock release deploy --owner \"$owner\"\n"
      "  export DLOCK_OWNER=$(dlock acquire -w 1m deploy)   # read by dlock release");
  return acquire;
}

int acquire_command(const AcquireFlags& flags) {
  auto ttl = parse_duration(flags.ttl);
  auto wait = parse_duration(flags.wait);
  for (const auto* d : {&ttl, &wait}) {
    if (!*d) {
      std::cerr << "dlock: " << d->error().message() << "\n";
      return kExitUsage;
    }
  }
  auto client = make_client(flags.connect);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  LockOptions options;
  options.ttl = *ttl;
  options.auto_renew = false;  // dlock exits: nothing would renew it
  options.fair = flags.fair;
  // The default owner is this process and thread: unique (a 128-bit random id), and it means
  // nothing once dlock has exited, so it is a fine token to hand out.
  options.owner = flags.owner.empty() ? Client::default_owner() : OwnerToken(flags.owner);
  auto lease = client->lock(flags.name, *wait, options);
  if (!lease) {
    std::cerr << "dlock: " << lease.error().message() << "\n";
    return exit_for(lease.error(), flags.conflict_exit_code);
  }
  // The token goes out first: if nobody can read it (a closed pipe, a full disk), the lock is
  // released here instead of staying held by an owner nobody knows.
  const std::string owner = lease->owner().str();
  if (flags.json) {
    std::cout << nlohmann::json{{"name", flags.name},
                                {"owner", owner},
                                {"fence", lease->fencing_token().value()},
                                {"validity_ms", lease->validity().count()}}
                     .dump()
              << "\n";
  } else {
    std::cout << owner << "\n";
  }
  std::cout.flush();
  if (!std::cout.good()) {
    std::cerr << "dlock: could not print the owner token; releasing the lock\n";
    (void)lease->unlock();
    return kExitUnavailable;
  }
  if (auto detached = lease->detach(); !detached) {  // lost already: a ttl below a round trip
    std::cerr << "dlock: " << detached.error().message() << "\n";
    return exit_for(detached.error(), flags.conflict_exit_code);
  }
  return kExitOk;
}

}  // namespace dlock::cli

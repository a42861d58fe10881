// SPDX-License-Identifier: MIT
#include "acquire_command.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <thread>

#include "duration.h"
#include "exit_codes.h"
#include "stop_signals.h"

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
  add_replica_flags(*acquire, flags.replicas);
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

namespace {

// SIGINT, SIGTERM and SIGHUP as a stop request, so an interrupted dlock never leaves a lock
// held by an owner nobody was told of. Made before the client starts its threads (they inherit
// the blocked mask).
class Interrupts {
 public:
  Interrupts()
      : watcher_([this](std::stop_token done) {
          while (!done.stop_requested()) {
            if (const int sig = signals_.wait_for(std::chrono::milliseconds(50)); sig != 0) {
              number_ = sig;
              stop_.request_stop();
              return;
            }
          }
        }) {}
  bool requested() const { return stop_.stop_requested(); }
  bool by_signal() const { return number_ != 0; }
  std::stop_token token() const { return stop_.get_token(); }
  int exit_status() const { return 128 + number_.load(); }

 private:
  StopSignals signals_;
  std::stop_source stop_;
  std::atomic<int> number_{0};
  std::jthread watcher_;  // last: stops and joins first
};

Result<LockOptions> acquire_options(const AcquireFlags& flags, std::chrono::milliseconds ttl) {
  LockOptions options;
  options.ttl = ttl;
  options.auto_renew = false;  // dlock exits: nothing would renew it
  options.fair = flags.fair;
  if (auto guard = apply_replica_flags(flags.replicas, options); !guard) {
    return std::move(guard).error();
  }
  // The default owner is this process and thread: unique (a 128-bit random id), and it means
  // nothing once dlock has exited, so it is a fine token to hand out.
  options.owner = flags.owner.empty() ? Client::default_owner() : OwnerToken(flags.owner);
  return options;
}

void print_owner(const AcquireFlags& flags, const Lease& lease) {
  const std::string owner = lease.owner().str();
  if (flags.json) {
    // Names and owners are bytes; JSON wants UTF-8: invalid bytes print as U+FFFD instead of
    // failing after the lock was taken.
    std::cout << nlohmann::json{{"name", flags.name},
                                {"owner", owner},
                                {"fence", lease.fencing_token().value()},
                                {"validity_ms", lease.validity().count()}}
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << owner << "\n";
  }
  std::cout.flush();
}

// Prints the owner token and leaves the lock to the caller. Anything that keeps the token
// from reaching the caller releases the lock here instead of leaving it held by an owner
// nobody knows: a signal, a closed or full stdout.
int hand_over(const AcquireFlags& flags, Lease& lease, const Interrupts& interrupts) {
  const std::string owner = lease.owner().str();
  auto give_back = [&](const std::string& why, int status) {
    std::cerr << "dlock: " << why << "; releasing the lock\n";
    if (auto r = lease.unlock(); !r && !r.error().is(errc::lock_lost)) {
      std::cerr << "dlock: release failed (" << r.error().message()
                << "); the lock ends with its ttl, or: dlock release " << flags.name << " --owner "
                << owner << "\n";
    }
    return status;
  };
  if (interrupts.requested()) return give_back("interrupted", interrupts.exit_status());
  print_owner(flags, lease);
  if (!std::cout.good()) return give_back("could not print the owner token", kExitUnavailable);
  if (interrupts.requested()) return give_back("interrupted", interrupts.exit_status());
  if (!lease.is_held()) {
    return give_back("the lock expired before its token was printed", kExitUnavailable);
  }
  if (auto detached = lease.detach(); !detached) {
    return give_back(detached.error().message(), kExitUnavailable);
  }
  // The token is out and the lock is the caller's: a signal from here on (pending, or a second
  // Ctrl-C) must not turn this into a failure the caller would read as "not acquired" once
  // StopSignals restores the mask.
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_IGN);
  return kExitOk;
}

}  // namespace

int acquire_command(const AcquireFlags& flags) {
  Interrupts interrupts;
  auto ttl = parse_duration(flags.ttl);
  auto wait = parse_duration(flags.wait);
  for (const auto* d : {&ttl, &wait}) {
    if (!*d) {
      std::cerr << "dlock: " << d->error().message() << "\n";
      return kExitUsage;
    }
  }
  if (interrupts.requested()) return interrupts.exit_status();
  auto client = make_client(flags.connect);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  auto options = acquire_options(flags, *ttl);
  if (!options) {
    std::cerr << "dlock: " << options.error().message() << "\n";
    return kExitUsage;
  }
  if (interrupts.requested()) return interrupts.exit_status();
  auto lease = client->lock(flags.name, *wait, *options, interrupts.token());
  if (!lease) {
    if (lease.error().is(errc::cancelled) && interrupts.by_signal()) {
      return interrupts.exit_status();
    }
    std::cerr << "dlock: " << lease.error().message() << "\n";
    return exit_for(lease.error(), flags.conflict_exit_code);
  }
  return hand_over(flags, *lease, interrupts);
}

}  // namespace dlock::cli

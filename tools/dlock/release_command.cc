// SPDX-License-Identifier: MIT
#include "release_command.h"

#include <dlock/semaphore.h>

#include <cstdlib>
#include <iostream>

#include "exit_codes.h"

namespace dlock::cli {

CLI::App* add_release_command(CLI::App& app, ReleaseFlags& flags) {
  CLI::App* release = app.add_subcommand(
      "release",
      "Give back a lock by its owner token (--owner), or clear it whoever holds it (--force)");
  add_connect_flags(*release, flags.connect);
  release->add_option("--owner", flags.owner,
                      "release the hold of this owner token (as printed by dlock acquire); "
                      "default: $DLOCK_OWNER");
  release->add_flag("--force", flags.force, "remove the lock whoever holds it (for operators)");
  release->add_flag("-y,--yes", flags.yes, "do not ask for confirmation");
  release
      ->add_option("-n,--permits", flags.permits,
                   "with --force: NAME is a semaphore of N permits; clear every permit")
      ->check(CLI::Range(1, 1024));
  release->add_flag("--foreign", flags.foreign,
                    "also delete a key that is not a dlock lock (another library's)");
  release->add_option("name", flags.name, "lock name")->required();
  release->footer(
      "With --owner (or DLOCK_OWNER): releases that owner's hold only, and wakes the waiters. "
      "Exit status: 0 released on a quorum of nodes, 1 not held by that owner (its ttl ended, "
      "or it was released already), 69 fewer than a quorum of nodes answered, 64 usage error.\n"
      "With --force: the holder is not told: its renewals fail and it loses the lock (dlock run "
      "then stops its command with exit 76). Waiters are woken. Exit status: 0 released (or "
      "nothing to release) on a quorum of nodes, 1 not confirmed, 69 fewer than a quorum of "
      "nodes answered, 64 usage error.\n\n"
      "Examples:\n"
      "  dlock release deploy --owner \"$owner\"    # owner=$(dlock acquire deploy)\n"
      "  dlock release --force nightly-report\n"
      "  dlock release --force --yes -r redis://10.0.0.1:6379 nightly-report");
  return release;
}

namespace {

int release_by_owner(const ReleaseFlags& flags, const std::string& owner) {
  if (owner.empty()) {
    std::cerr << "dlock: the owner token is empty\n";
    return kExitUsage;
  }
  auto client = make_client(flags.connect);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  auto released = client->unlock(flags.name, OwnerToken(owner));
  if (released) return kExitOk;
  std::cerr << "dlock: " << released.error().message() << "\n";
  if (released.error().is(errc::not_owner)) return 1;
  return released.error().is(errc::invalid_argument) ? kExitUsage : kExitUnavailable;
}

// The locks to clear: a semaphore is its slots, each an ordinary lock (dlock/semaphore.h).
std::vector<std::string> names_to_clear(Client& client, const ReleaseFlags& flags) {
  if (flags.permits == 0) return {flags.name};
  const Semaphore semaphore(client, flags.name, flags.permits);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < flags.permits; ++i) names.push_back(semaphore.slot_name(i));
  return names;
}

struct Seen {
  std::size_t present = 0;  // keys found, over all nodes and names
  std::size_t nodes = 0;
};

// Prints what each node holds under each name, for the operator to confirm.
Result<Seen> show_holders(Client& client, const std::vector<std::string>& names) {
  Seen seen;
  for (const auto& name : names) {
    auto status = client.status(name);
    if (!status) return std::move(status).error();
    seen.nodes = status->nodes.size();
    for (const auto& n : status->nodes) {
      if (n.error) continue;
      if (n.kind != KeyKind::free) ++seen.present;
      std::cout << (names.size() > 1 ? name + " on " : "") << n.node << ": " << to_string(n.kind);
      for (const auto& holder : n.owners) std::cout << " " << holder.owner.str();
      for (const auto& reader : n.readers) std::cout << " reader " << reader.owner.str();
      std::cout << "\n";
    }
  }
  return seen;
}

bool confirmed(const ReleaseFlags& flags, const Seen& seen) {
  if (flags.yes) return true;
  std::cout << "Release " << (flags.permits > 0 ? "semaphore" : "lock") << " '" << flags.name
            << "' on all " << seen.nodes << " nodes (present " << seen.present << " times)? [y/N] "
            << std::flush;
  std::string answer;
  return std::getline(std::cin, answer) && (answer == "y" || answer == "Y" || answer == "yes");
}

int clear(Client& client, const std::vector<std::string>& names, bool foreign) {
  for (const auto& name : names) {
    auto report = client.force_release(name, foreign);
    if (!report) {
      std::cerr << "dlock: " << report.error().message() << "\n";
      return kExitUsage;
    }
    std::size_t answered = 0;
    for (const auto& r : *report) {
      std::cout << (names.size() > 1 ? name + " on " : "") << r.node << ": "
                << (r.error ? "error: " + r.error->reason : std::string(to_string(*r.outcome)))
                << "\n";
      if (!r.error) ++answered;
    }
    if (answered < client.quorum()) {
      std::cerr << "dlock: only " << answered << " of " << report->size()
                << " nodes answered; the rest keep the key until its ttl ends\n";
      return kExitUnavailable;
    }
  }
  return kExitOk;
}

int force_release(const ReleaseFlags& flags) {
  auto client = make_client(flags.connect);
  if (!client) {
    std::cerr << "dlock: " << client.error().message() << "\n";
    return kExitUsage;
  }
  const std::vector<std::string> names = names_to_clear(*client, flags);
  auto seen = show_holders(*client, names);
  if (!seen) {
    std::cerr << "dlock: " << seen.error().message() << "\n";
    return kExitUsage;
  }
  if (!confirmed(flags, *seen)) {
    std::cout << "not released\n";
    return 1;
  }
  return clear(*client, names, flags.foreign);
}

}  // namespace

int release_command(const ReleaseFlags& flags) {
  if (flags.force && flags.owner) {
    std::cerr << "dlock: release takes --owner (one holder) or --force (whoever holds it), not "
                 "both\n";
    return kExitUsage;
  }
  if (flags.owner) return release_by_owner(flags, *flags.owner);
  if (flags.force) return force_release(flags);
  if (const char* env = std::getenv("DLOCK_OWNER"); env != nullptr) {
    return release_by_owner(flags, env);
  }
  std::cerr << "dlock: release needs --owner TOKEN (the holder's, from dlock acquire) or "
               "--force (removes the lock whoever holds it)\n";
  return kExitUsage;
}

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// dlock/status.h and dlock/version.h: what each node knows about a lock, as typed values.
//   lock_status redis://127.0.0.1:6379 [more node URLs...]
#include <dlock/dlock.h>
#include <dlock/version.h>

#include <chrono>
#include <iostream>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  dlock::ClientOptions options;
  for (int i = 1; i < argc; ++i) options.nodes.emplace_back(argv[i]);
  if (options.nodes.empty()) options.nodes = {"redis://127.0.0.1:6379"};
  auto client = dlock::Client::create(options);
  if (!client) {
    std::cerr << client.error().message() << "\n";
    return 64;
  }
  std::cout << "dlock " << DLOCK_VERSION_STRING << "\n";
  auto lease = client->try_lock("example:status");
  if (!lease) {
    std::cerr << lease.error().message() << "\n";
    return 75;
  }
  auto status = client->status("example:status");
  if (!status) {
    std::cerr << status.error().message() << "\n";
    return 64;
  }
  std::cout << status->name << (status->held ? " is held" : " is free") << " (quorum "
            << status->quorum << ")\n";
  for (const dlock::NodeLockState& n : status->nodes) {
    std::cout << "  " << n.node << ": ";
    if (n.error) {
      std::cout << "error: " << n.error->reason << "\n";
      continue;
    }
    std::cout << dlock::to_string(n.kind);
    if (n.ttl) std::cout << ", " << n.ttl->count() << " ms left";
    for (const dlock::NodeHolder& h : n.owners) std::cout << ", owner " << h.owner.str();
    std::cout << ", fence " << n.fence.value();
    if (n.quarantine > 0ms)
      std::cout << ", restarted: out of quorums for " << n.quarantine.count() << " ms";
    std::cout << "\n";
  }
  return status->held && lease->unlock() ? 0 : 1;
}

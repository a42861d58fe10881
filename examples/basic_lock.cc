// SPDX-License-Identifier: MIT
// The README's example: take a lock on one or more Redis nodes, work, release.
//   basic_lock redis://127.0.0.1:6379 [more node URLs...]
#include <dlock/dlock.h>

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
  dlock::LockOptions lock_options;
  lock_options.ttl = 10s;
  auto lease = client->lock("example:report", 5s, lock_options);
  if (!lease) {
    std::cerr << "not acquired: " << lease.error().message() << "\n";
    return 75;
  }
  std::cout << "holding " << lease->name() << " with fencing token "
            << lease->fencing_token().value() << ", valid for " << lease->validity().count()
            << " ms\n";
  // ... work on the shared resource, passing the fencing token along with each write ...
  if (auto r = lease->unlock(); !r) {
    std::cerr << "release: " << r.error().message() << "\n";
    return 1;
  }
  return 0;
}

// SPDX-License-Identifier: MIT
// dlock/fenced_store.h: a resource that refuses writes from a holder whose lease has passed to
// someone else. The first holder pauses past its ttl; the second holder writes; the first
// wakes and writes with its older token, and the store refuses it.
//   fenced_write redis://127.0.0.1:6379 [more lock node URLs...]   (the first URL also keeps
//   the resource)
#include <dlock/dlock.h>

#include <chrono>
#include <iostream>
#include <thread>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  dlock::ClientOptions options;
  for (int i = 1; i < argc; ++i) options.nodes.emplace_back(argv[i]);
  if (options.nodes.empty()) options.nodes = {"redis://127.0.0.1:6379"};
  auto client = dlock::Client::create(options);
  auto store = dlock::FencedStore::connect(options.nodes.front());
  if (!client || !store) {
    std::cerr << (client ? store.error() : client.error()).message() << "\n";
    return 64;
  }
  dlock::LockOptions explicit_lease;
  explicit_lease.ttl = 300ms;
  explicit_lease.auto_renew = false;  // nobody renews it while its holder is paused

  auto first = client->lock("example:account", 2s, explicit_lease);
  if (!first) {
    std::cerr << first.error().message() << "\n";
    return 75;
  }
  std::this_thread::sleep_for(500ms);  // a GC pause, a VM migration: the lease ran out

  dlock::LockOptions other = explicit_lease;
  other.owner = dlock::OwnerToken("another-process");
  auto second = client->lock("example:account", 2s, other);
  if (!second) {
    std::cerr << second.error().message() << "\n";
    return 75;
  }
  auto newer = store->write("example:account", "balance=120", second->fencing_token());
  auto stale = store->write("example:account", "balance=90", first->fencing_token());
  if (!newer || !stale) {
    std::cerr << "store: " << (newer ? stale.error() : newer.error()).message() << "\n";
    return 69;
  }
  std::cout << "token " << second->fencing_token().value() << " wrote: " << std::boolalpha << *newer
            << "; stale token " << first->fencing_token().value() << " wrote: " << *stale << "\n";
  (void)second->unlock();
  return *newer && !*stale ? 0 : 1;
}

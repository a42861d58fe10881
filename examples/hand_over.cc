// SPDX-License-Identifier: MIT
// dlock/types.h: an owner by name. The default owner is this process and thread (reentrant on
// that thread); a named owner lets a lock taken on one thread be released on another, or by
// another process that knows the token (as `dlock release --owner` does).
//   hand_over redis://127.0.0.1:6379 [more node URLs...]
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
  if (!client) {
    std::cerr << client.error().message() << "\n";
    return 64;
  }
  // A job id makes a good owner: unique among contenders, known to whoever finishes the job.
  const dlock::OwnerToken job("job-7f3a");
  dlock::LockOptions lock_options;
  lock_options.owner = job;
  lock_options.ttl = 10s;
  lock_options.auto_renew = false;  // renewal follows a thread; this lock outlives its taker's
  auto lease = client->try_lock("example:batch", lock_options);
  if (!lease) {
    std::cerr << lease.error().message() << "\n";
    return 75;
  }
  // The Lease object is not needed to release: the owner token is.
  dlock::Result<void> released = dlock::Error(dlock::errc::invalid_argument, "not run");
  std::thread finisher([&] { released = client->unlock("example:batch", job); });
  finisher.join();
  if (!released) {
    std::cerr << "release: " << released.error().message() << "\n";
    return 1;
  }
  std::cout << "taken on one thread, released on another by owner " << job.str() << "\n";
  return lease->is_held() ? 1 : 0;
}

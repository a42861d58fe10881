// SPDX-License-Identifier: MIT
// dlock/mutex.h: a distributed lock through the standard lock types. Four threads each add to
// a counter under std::scoped_lock; a fifth tries with a deadline, in any std::chrono unit.
//   mutex_guard redis://127.0.0.1:6379 [more node URLs...]
#include <dlock/dlock.h>

#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

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
  lock_options.ttl = 1.5s;  // any unit: a floating-point duration becomes 1500 ms
  dlock::Mutex counter_lock(*client, "example:counter", lock_options, [](const dlock::Error& e) {
    std::cerr << "unlock: " << e.message() << "\n";
  });

  int counter = 0;  // stands for a resource other processes share too
  try {
    std::vector<std::jthread> workers;
    for (int t = 0; t < 4; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < 25; ++i) {
          std::scoped_lock guard(counter_lock);  // each thread is its own owner
          ++counter;
        }
      });
    }
  } catch (const dlock::Exception& e) {  // no quorum, bad input: not contention
    std::cerr << "lock: " << e.what() << "\n";
    return 69;
  }
  std::unique_lock guard(counter_lock, std::defer_lock);
  if (!guard.try_lock_for(std::chrono::duration<double>(2.0))) {
    std::cerr << "not acquired within 2 s\n";
    return 75;
  }
  std::cout << "counter " << counter << ", fencing token "
            << counter_lock.lease()->fencing_token().value() << "\n";
  return counter == 100 ? 0 : 1;
}

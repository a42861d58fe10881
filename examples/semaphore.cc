// SPDX-License-Identifier: MIT
// dlock/semaphore.h: at most 2 of 6 workers at once, across every process that uses the name.
// Each permit is a lease with its own fencing token; a worker that died would free its permit
// when its ttl ran out.
//   semaphore redis://127.0.0.1:6379 [more node URLs...]
#include <dlock/dlock.h>

#include <atomic>
#include <chrono>
#include <iostream>
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
  lock_options.ttl = 5s;
  dlock::Semaphore downloads(*client, "example:downloads", 2, lock_options);

  std::atomic<int> inside{0}, most{0}, done{0}, failed{0};
  {
    std::vector<std::jthread> workers;
    for (int w = 0; w < 6; ++w) {
      workers.emplace_back([&] {
        auto permit = downloads.acquire_lease(30s);  // waits by pub/sub for a free permit
        if (!permit) {
          std::cerr << "no permit: " << permit.error().message() << "\n";
          ++failed;
          return;
        }
        const int now = ++inside;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(20ms);  // the work a permit allows
        --inside;
        if (permit->unlock()) ++done;  // or let the Lease go out of scope
      });
    }
  }
  // std::counting_semaphore's names: the permit is kept in the Semaphore. Results all the same.
  if (auto got = downloads.try_acquire_for(2s); !got) {
    std::cerr << "no permit: " << got.error().message() << "\n";
    return 75;
  }
  if (auto given_back = downloads.release(); !given_back) {
    std::cerr << "release: " << given_back.error().message() << "\n";
    return 1;
  }

  std::cout << done.load() << " downloads, at most " << most.load() << " at once (2 permits)\n";
  return failed.load() == 0 && done.load() == 6 && most.load() <= 2 ? 0 : 1;
}

// SPDX-License-Identifier: MIT
// dlock/shared_mutex.h: a read-write lock through the standard lock types. Three reader threads
// read a two-field record under std::shared_lock while a writer updates both fields under
// std::unique_lock; no reader ever sees the fields disagree. Then the downgrade: the writer
// takes the read lock before it lets go of the write lock.
//   read_write redis://127.0.0.1:6379 [more node URLs...]
#include <dlock/dlock.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <shared_mutex>
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
  lock_options.ttl = 2s;
  dlock::SharedMutex record_lock(*client, "example:record", lock_options);

  // Stands for a record other processes share too. Atomics only so that a reader beside a
  // writer (the bug this prevents) would be a wrong answer, not undefined behaviour.
  std::atomic<int> first{0}, second{0};
  std::atomic<int> torn{0}, reads{0};
  try {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 15; ++i) {
          std::shared_lock reading(record_lock);  // readers share it
          if (first.load() != second.load()) ++torn;
          ++reads;
        }
      });
    }
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        std::unique_lock writing(record_lock);  // waits for the readers; new ones wait for it
        first.fetch_add(1);
        std::this_thread::sleep_for(1ms);  // a reader let in now would see first != second
        second.fetch_add(1);
      }
    });
  } catch (const dlock::Exception& e) {  // no quorum, bad input: not contention
    std::cerr << "lock: " << e.what() << "\n";
    return 69;
  }

  // Downgrade: write, then read without letting anyone write in between.
  record_lock.lock();
  const auto write_token = record_lock.lease()->fencing_token();
  record_lock.lock_shared();  // allowed: this thread is the writer
  record_lock.unlock();
  const bool reading_after = record_lock.shared_lease()->is_held();
  const auto read_token = record_lock.shared_lease()->fencing_token();
  record_lock.unlock_shared();

  std::cout << reads.load() << " reads, " << torn.load() << " torn, record " << first.load() << "/"
            << second.load() << ", write token " << write_token.value() << " < read token "
            << read_token.value() << "\n";
  const bool ok = torn.load() == 0 && reads.load() == 45 && first.load() == 10 &&
                  second.load() == 10 && reading_after && write_token < read_token;
  return ok ? 0 : 1;
}

// SPDX-License-Identifier: MIT
// The asio API from C++20 coroutines: many lock cycles in flight from one thread, each a
// coroutine that takes its own lock, works, and releases it.
//   async_lock redis://127.0.0.1:6379 [more node URLs...]
#include <dlock/async.h>

#include <asio.hpp>
#include <chrono>
#include <iostream>
#include <string>

namespace {

using namespace std::chrono_literals;

asio::awaitable<void> job(dlock::Client client, int n, int& done) {
  dlock::LockOptions options;
  options.ttl = 10s;
  auto lease = co_await dlock::async_try_lock(client, "example:job:" + std::to_string(n), options,
                                              asio::use_awaitable);
  if (!lease) {
    std::cerr << "job " << n << ": " << lease.error().message() << "\n";
    co_return;
  }
  // ... work on the shared resource, passing lease->fencing_token() along ...
  auto released = co_await dlock::async_unlock(*lease, asio::use_awaitable);
  if (released) ++done;
}

}  // namespace

int main(int argc, char** argv) {
  dlock::ClientOptions options;
  for (int i = 1; i < argc; ++i) options.nodes.emplace_back(argv[i]);
  if (options.nodes.empty()) options.nodes = {"redis://127.0.0.1:6379"};
  auto client = dlock::Client::create(options);
  if (!client) {
    std::cerr << client.error().message() << "\n";
    return 64;
  }
  asio::io_context io;  // one thread: every job's completions run here
  int done = 0;
  for (int n = 0; n < 64; ++n) asio::co_spawn(io, job(*client, n, done), asio::detached);
  io.run();
  std::cout << done << " of 64 jobs held their lock and released it\n";
  return done == 64 ? 0 : 75;
}

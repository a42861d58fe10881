// SPDX-License-Identifier: MIT
// The asio API's completion handlers run with their caller's signal mask (docs/async.md,
// "Signals"): asio's system pool, where plain callbacks and use_future's promises complete,
// must be started on a caller's thread, never on the client's io thread, which blocks every
// asynchronous signal and whose mask threads started there inherit. No server: a node nobody
// listens on fails every acquisition on the io thread, which is where the pool was started
// when a use_future call came first (found by reading asio's promise_executor, which posts to
// the system pool: plain callbacks made afterwards ran with SIGINT blocked).
#include <dlock/async.h>
#include <dlock/dlock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/use_future.hpp>
#include <csignal>
#include <future>
#include <string>

namespace dlock {
namespace {

bool sigint_blocked_here() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGINT) == 1;
}

// A loopback port that nothing listens on (bound, then closed: the kernel refuses connections).
int closed_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t size = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size);
  close(fd);
  return ntohs(addr.sin_port);
}

// Whether a plain callback, made after a use_future call that was the process's first asio
// call, runs with SIGINT blocked. In a process of its own: asio's system pool is started once
// per process.
bool callback_after_a_future_blocks_sigint() {
  ClientOptions options;
  options.nodes.push_back("redis://127.0.0.1:" + std::to_string(closed_port()));
  Result<Client> client = Client::create(options);
  if (!client) return true;
  LockOptions lock;
  lock.ttl = Millis(10'000);
  (void)async_try_lock(*client, "first", lock, asio::use_future).get();
  std::promise<bool> blocked;
  async_try_lock(*client, "second", lock,
                 [&blocked](Result<Lease>) { blocked.set_value(sigint_blocked_here()); });
  return blocked.get_future().get();
}

TEST(AsyncSignalTest, CallbacksRunWithTheCallersMaskAfterAFutureCameFirst) {
  ASSERT_FALSE(sigint_blocked_here());
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: no system pool yet
  EXPECT_EXIT(_exit(callback_after_a_future_blocks_sigint() ? 1 : 0), ::testing::ExitedWithCode(0),
              "");
}

}  // namespace
}  // namespace dlock

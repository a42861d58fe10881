// SPDX-License-Identifier: MIT
// Ports picked for test and sandbox servers are claimed by the process that picked them, so
// that parallel test processes never share one: a test that kills a server and starts it again
// on its port keeps clients reconnecting to that port, and they must not reach another test's
// server meanwhile (a foreign client's boot records once made a fresh lock set wait, in CI).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "redis_process.h"

namespace dlock::sandbox {
namespace {

// What `check` returns in a child process (fork): no claim of ours is inherited.
int in_child(const std::function<bool()>& check) {
  const pid_t pid = fork();
  if (pid == 0) _exit(check() ? 1 : 0);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(PortClaimTest, APortPickedHereIsNotAnotherProcesssWhileThisOneLives) {
  const std::uint16_t port = free_loopback_port();
  ASSERT_NE(port, 0);
  // Nothing listens on it: only the claim keeps it ours.
  EXPECT_TRUE(claim_port(port)) << "ours already";
  EXPECT_EQ(in_child([&] { return claim_port(port); }), 0) << "another process may not claim it";
  EXPECT_EQ(in_child([&] {
              for (int i = 0; i < 200; ++i) {
                if (free_loopback_port() == port) return true;
              }
              return false;
            }),
            0)
      << "nor pick it";
}

TEST(PortClaimTest, AClusterPortClaimsItsBusPortToo) {
  const std::uint16_t port = free_cluster_port();
  ASSERT_NE(port, 0);
  const auto bus = static_cast<std::uint16_t>(port + 10000);
  EXPECT_EQ(in_child([&] { return claim_port(port) || claim_port(bus); }), 0);
}

TEST(PortClaimTest, AClaimEndsWithItsProcess) {
  // A child picks a port and exits; the port is free to claim again.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    const std::uint16_t port = free_loopback_port();
    (void)!write(fds[1], &port, sizeof port);
    _exit(0);
  }
  std::uint16_t port = 0;
  ASSERT_EQ(read(fds[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  waitpid(pid, nullptr, 0);
  close(fds[0]);
  close(fds[1]);
  ASSERT_NE(port, 0);
  EXPECT_TRUE(claim_port(port));
}

}  // namespace
}  // namespace dlock::sandbox

// SPDX-License-Identifier: MIT
#include "lock/owner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <thread>

namespace dlock::lock {
namespace {

TEST(RandomHexTest, HasTheRequestedSizeAndDoesNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string v = random_hex(16);
    ASSERT_EQ(v.size(), 32u);  // 128 bits
    ASSERT_TRUE(seen.insert(v).second);
  }
}

TEST(OwnerTest, ThreadsOfOneProcessShareTheProcessIdButNotTheOwner) {
  OwnerToken here = thread_owner();
  OwnerToken there;
  std::thread([&] { there = thread_owner(); }).join();
  EXPECT_NE(here, there);
  EXPECT_EQ(here.str().substr(0, 33), there.str().substr(0, 33));
  EXPECT_EQ(here, thread_owner());
}

TEST(OwnerTest, ForkedChildGetsANewProcessId) {
  const std::string parent = process_id();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string child = process_id();
    ssize_t n = write(fds[1], child.data(), child.size());
    _exit(n == static_cast<ssize_t>(child.size()) ? 0 : 1);
  }
  char buf[64] = {};
  ssize_t n = read(fds[0], buf, sizeof buf);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  close(fds[1]);
  ASSERT_EQ(n, 32);
  EXPECT_NE(std::string(buf, 32), parent);
}

}  // namespace
}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
#include "lock/owner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <set>
#include <string>
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

// The owners a child makes, by `make_child` (fork() or a call that runs no pthread_atfork
// handler), against the parent's next ones: a child that kept its parent's would share them,
// and reentrancy goes by owner (two holders). Reads "TASK THREAD" from the child.
void expect_child_owners_differ(const std::function<pid_t()>& make_child) {
  const OwnerToken parent_thread = thread_owner();
  (void)task_owner();  // the per-thread prefix is made by now
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = make_child();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string both = task_owner().str() + " " + thread_owner().str();
    const ssize_t n = write(fds[1], both.data(), both.size());
    _exit(n == static_cast<ssize_t>(both.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    got.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const auto space = got.find(' ');
  ASSERT_NE(space, std::string::npos) << got;
  const std::string child_task = got.substr(0, space);
  const std::string child_thread = got.substr(space + 1);
  const OwnerToken parent_next_task = task_owner();
  EXPECT_NE(child_task, parent_next_task.str()) << "the child counts tasks with its parent's owner";
  EXPECT_NE(child_task.substr(0, 32), parent_next_task.str().substr(0, 32));
  EXPECT_NE(child_thread, parent_thread.str()) << "the child kept its parent's thread owner";
}

TEST(OwnerTest, AForkedChildMakesOwnersOfItsOwn) {
  expect_child_owners_differ([] { return fork(); });
}

// _Fork() (and a raw clone()) runs no pthread_atfork handler: found by review, where a fork
// mark kept by such a handler left the child with its parent's owners.
TEST(OwnerTest, AChildMadeWithoutForkHandlersMakesOwnersOfItsOwn) {
  expect_child_owners_differ([] { return _Fork(); });
}

}  // namespace
}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
// Every program in examples/ (one per public header) runs against real servers and exits 0:
// each checks what it demonstrates (the counter, the refused stale write, the typed status...)
// and exits non-zero otherwise. On 1 node and on 3 (Redlock).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/redis_server.h"

namespace dlock {
namespace {

struct Case {
  const char* example;
  std::size_t nodes;
};

class ExamplesTest : public ::testing::TestWithParam<Case> {};

TEST_P(ExamplesTest, RunsAndExitsZero) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster nodes(GetParam().nodes);
  std::string cmd = std::string(DLOCK_EXAMPLES_DIR) + "/" + GetParam().example;
  for (const auto& url : nodes.urls()) cmd += " '" + url + "'";
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) output.append(buf, n);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(info.param.example) + "_" + std::to_string(info.param.nodes) + "nodes";
}

std::vector<Case> cases() {
  std::vector<const char*> names{"basic_lock",  "mutex_guard",  "fenced_write",
                                 "lock_status", "result_chain", "hand_over",
                                 "metrics",     "read_write",   "semaphore"};
#ifdef DLOCK_HAVE_ASYNC_EXAMPLE
  names.push_back("async_lock");
#endif
  std::vector<Case> all;
  for (const char* name : names) all.insert(all.end(), {Case{name, 1}, Case{name, 3}});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Examples, ExamplesTest, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace dlock

// SPDX-License-Identifier: MIT
// Fencing tokens: strictly greater than every earlier holder's, on 1 and 5 nodes, also while
// minority nodes die and restart empty.
#include <cstdio>
#include <random>
#include <thread>

#include "support/cluster_fixture.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;

class FencingTest : public test::ClusterTest {};

TEST_P(FencingTest, TokensGrowWithEveryAcquisition) {
  Client a = make_client();
  Client b = make_client();
  FencingToken last;
  for (int i = 0; i < 50; ++i) {
    Client& c = i % 2 == 0 ? a : b;
    auto lease = c.try_lock("job", fixed(5s));
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_GT(lease->fencing_token(), last) << "acquisition " << i;
    last = lease->fencing_token();
    ASSERT_TRUE(lease->unlock());
  }
}

INSTANTIATE_TEST_SUITE_P(Nodes, FencingTest, ::testing::Values(1, 5), test::node_count_name);

class FencingRedlockTest : public test::ClusterTest {};

// The naive "maximum of the quorum's counters" fails here: the largest counter sits on one
// node, which is then killed. The token must still have been raised on a majority.
TEST_P(FencingRedlockTest, TokenSurvivesTheLossOfTheNodeItCameFrom) {
  // Above the other nodes' first counters (their clocks in microseconds, about 1.8e15 now).
  (*nodes_)[0].command({"SET", "dlock:fence:{job}", "4000000000000000"});
  Client client = make_client();
  auto first = client.try_lock("job", fixed(5s));
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(first->fencing_token().value(), 4000000000000001u);
  ASSERT_TRUE(first->unlock());
  (*nodes_)[0].kill9();
  auto second = client.try_lock("job", fixed(5s));
  ASSERT_TRUE(second) << second.error().message();
  EXPECT_GT(second->fencing_token(), first->fencing_token());
}

TEST_P(FencingRedlockTest, ThousandAcquisitionsStayOrderedWhileMinorityNodesRestartEmpty) {
  Client client = make_client(200ms);
  std::mt19937 rng(42);
  FencingToken last;
  int restarts = 0;
  for (int i = 0; i < 1000; ++i) {
    if (i % 40 == 39) {
      // Kill -9 and restart empty one or two nodes (a minority), chosen at random.
      const std::size_t victims = 1 + rng() % 2;
      std::vector<std::size_t> order{0, 1, 2, 3, 4};
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t k = 0; k < victims; ++k) (*nodes_)[order[k]].restart(/*keep_data=*/false);
      ++restarts;
      // A minority at a time: the restarted nodes rejoin (the client reconnects, greets, and
      // they join) before the next ones restart. Restarts that pile up faster than that make
      // a majority of nodes that remember nothing, and the set then waits for good
      // (RestartTest.WithOneMemberDownARestartedNodeWaitsForTheNodesThatRemember).
      std::this_thread::sleep_for(300ms);
    }
    auto lease = client.lock("job", 20s, fixed(300ms));
    ASSERT_TRUE(lease) << "acquisition " << i << ": " << lease.error().message();
    ASSERT_GT(lease->fencing_token(), last) << "acquisition " << i;
    last = lease->fencing_token();
    (void)lease->unlock();
  }
  EXPECT_GE(restarts, 20);
}

TEST_P(FencingRedlockTest, DlockRunHandsOutGrowingTokensWhileNodesRestart) {
  const std::string run = "DLOCK_REDIS=" + nodes_->url_list() + " " + DLOCK_TOOL_PATH +
                          " run -t 300ms -w 20s job -- sh -c 'echo $DLOCK_TOKEN'";
  long last = 0;
  for (int i = 0; i < 60; ++i) {
    if (i % 10 == 9) (*nodes_)[static_cast<std::size_t>(i / 10) % 5].restart(false);
    FILE* p = popen(run.c_str(), "r");
    ASSERT_NE(p, nullptr);
    long token = 0;
    ASSERT_EQ(fscanf(p, "%ld", &token), 1) << "run " << i;
    ASSERT_EQ(pclose(p), 0) << "run " << i;
    ASSERT_GT(token, last) << "run " << i;
    last = token;
  }
}

INSTANTIATE_TEST_SUITE_P(Nodes, FencingRedlockTest, ::testing::Values(5), test::node_count_name);

}  // namespace
}  // namespace dlock

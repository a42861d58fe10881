// SPDX-License-Identifier: MIT
// Fencing tokens: strictly greater than every earlier holder's, on 1 and 5 nodes, also while
// minority nodes die and restart empty.
#include <cstdio>
#include <random>
#include <thread>

#include "lock/calls.h"
#include "lock/keys.h"
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

// fence_raise.lua on a real server, called as the client calls it (lock/calls.h): it confirms
// a token only while the hold it is for is still on the node (docs/simulation.md, finding 11).
class FenceRaiseScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    server_ = std::make_unique<test::RedisServer>();
  }
  // Runs `call`'s script with EVAL, as a node does (a script that publishes gets "publish"
  // last: node/server_node.cc).
  test::ReplyPtr eval(const node::Call& call) const {
    std::vector<std::string> args{"EVAL", std::string(call.script->source),
                                  std::to_string(call.keys.size())};
    for (const std::string_view key : call.keys) args.emplace_back(key);
    for (const std::string_view arg : call.args) args.emplace_back(arg);
    if (call.script->publishes) args.emplace_back("publish");
    auto r = server_->command(args);
    EXPECT_TRUE(r && r->type != REDIS_REPLY_ERROR) << (r && r->str ? r->str : "no reply");
    return r;
  }
  // The counter a granting acquire.lua replied (a bare integer; 0 if it did not grant), counting
  // by name as a client of several nodes does (fence_raise.lua is its second round).
  long long grant(const lock::HoldId& hold, std::size_t permits = 0) const {
    const auto r =
        eval(lock::acquire_call(hold, 10s, std::nullopt, lock::WriterWait{}, permits, ""));
    if (!r || r->type != REDIS_REPLY_INTEGER) return 0;
    return r->integer;
  }
  long long raise(const lock::HoldId& hold, long long token) const {
    const auto r = eval(lock::fence_raise_call(hold, static_cast<std::uint64_t>(token), 10s));
    return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -2;
  }
  std::string get(const std::string& key) const {
    const auto r = server_->command({"GET", key});
    return r && r->type == REDIS_REPLY_STRING ? r->str : "";
  }
  std::unique_ptr<test::RedisServer> server_;
};

TEST_F(FenceRaiseScriptTest, ConfirmsOnlyWhileTheHoldIsThere) {
  const lock::HoldId first{"job", OwnerToken("a"), "c1.1", lock::HoldKind::write};
  const lock::HoldId second{"job", OwnerToken("b"), "c2.1", lock::HoldKind::write};
  const long long granted = grant(first);
  ASSERT_GT(granted, 0);
  const long long token = granted + 5;  // another node's counter was larger
  EXPECT_EQ(raise(first, token), token);
  // An operator's force_release between the grant and the raise; another owner is granted.
  const auto forced = eval(lock::force_release_call("job", false));
  ASSERT_TRUE(forced && forced->str);
  EXPECT_STREQ(forced->str, "deleted");
  ASSERT_EQ(grant(second), token + 1);
  EXPECT_EQ(raise(first, token + 10), -1) << "the raise confirmed a hold that is gone";
  EXPECT_EQ(get(lock::fence_key("job")), std::to_string(token + 10)) << "raised all the same";
  EXPECT_EQ(raise(second, token + 10), token + 10);
  // The same owner's other hold (another hold id) is not this hold.
  const lock::HoldId later{"job", OwnerToken("b"), "c2.2", lock::HoldKind::write};
  EXPECT_EQ(raise(later, token + 10), -1);
}

TEST_F(FenceRaiseScriptTest, ReadHoldsAndSemaphoreSlotsAreCheckedWhereTheyLive) {
  const lock::HoldId reader{"doc", OwnerToken("r"), "c1.1", lock::HoldKind::read};
  const long long granted = grant(reader);
  ASSERT_GT(granted, 0);
  EXPECT_EQ(raise(reader, granted), granted);
  const lock::HoldId writer{"doc", OwnerToken("r"), "c1.1", lock::HoldKind::write};
  EXPECT_EQ(raise(writer, granted), -1) << "a read hold is not a write hold";
  (void)eval(lock::force_release_call("doc", false));
  EXPECT_EQ(raise(reader, granted), -1);

  const lock::HoldId permit{lock::semaphore_slot("pool", 0), OwnerToken("p"), "c1.1",
                            lock::HoldKind::write};
  const long long slot = grant(permit, 2);
  ASSERT_GT(slot, 0);
  EXPECT_EQ(raise(permit, slot + 1), slot + 1);
  (void)eval(lock::release_call(permit));
  EXPECT_EQ(raise(permit, slot + 2), -1);
}

// A raise writes the floor, and the name's counter only where the name has one: an absent counter
// counts from the floor (acquire.lua), and one written by the raise would send the next grants of
// the name by the node's counter (every lock set of this client) off acquire.lua's fast path.
// Either way every later grant of the name, by either counter, is above the token.
TEST_F(FenceRaiseScriptTest, RaisesTheFloorAndOnlyANameCounterThatExists) {
  const lock::HoldId hold{"job", OwnerToken("a"), "c1.1", lock::HoldKind::write};
  const auto by_node = [&](const lock::HoldId& h) {
    const auto r = eval(lock::acquire_call(h, 10s, std::nullopt, lock::WriterWait{}, 0, "",
                                           lock::TokenCounter::node));
    return r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
  };
  const long long granted = by_node(hold);
  ASSERT_GT(granted, 0);
  EXPECT_EQ(raise(hold, granted + 5), granted + 5);
  EXPECT_EQ(get(std::string(lock::kFenceFloorKey)), std::to_string(granted + 5));
  EXPECT_EQ(get(lock::fence_key("job")), "") << "a name counter the node did not have";
  (void)eval(lock::release_call(hold));
  const lock::HoldId next{"job", OwnerToken("b"), "c2.1", lock::HoldKind::write};
  EXPECT_EQ(by_node(next), granted + 6);
  (void)eval(lock::release_call(next));
  // By the name's counter (fair mode, an older client): from the raised floor.
  const lock::HoldId named{"job", OwnerToken("c"), "c3.1", lock::HoldKind::write};
  EXPECT_EQ(grant(named), granted + 7);
  EXPECT_EQ(get(lock::fence_key("job")), std::to_string(granted + 7));
  // A name counter that exists is raised with the floor.
  EXPECT_EQ(raise(named, granted + 20), granted + 20);
  EXPECT_EQ(get(lock::fence_key("job")), std::to_string(granted + 20));
  EXPECT_EQ(get(std::string(lock::kFenceFloorKey)), std::to_string(granted + 20));
}

// A node that lost its memory counts from its clock in microseconds (acquire.lua's counter()):
// a raise to a small token leaves it so, and writes no floor below that clock.
TEST_F(FenceRaiseScriptTest, AnEmptyNodeIsNotLoweredToTheToken) {
  const lock::HoldId hold{"job", OwnerToken("a"), "c1.1", lock::HoldKind::write};
  EXPECT_EQ(raise(hold, 5), -1);
  EXPECT_EQ(get(std::string(lock::kFenceFloorKey)), "");
  EXPECT_GT(grant(hold), 1'000'000'000'000'000LL);
}

// A count at or below 10^15 counts nothing (acquire.lua's count_of(); an INCR of a lost floor
// writes 1), so the node counts from its clock. A raise or a greeting's floor_raise to a token
// below that clock must leave it so: the review of that rule found both wrote the token over the
// floor of 1, and the name's next grant came out below its grant before the floor was lost.
TEST_F(FenceRaiseScriptTest, ASmallCountIsNoneAndNotRaisedBelowTheClock) {
  const lock::HoldId y{"y", OwnerToken("a"), "c1.1", lock::HoldKind::write};
  const long long before = grant(y);
  ASSERT_GT(before, 1'000'000'000'000'000LL);
  (void)eval(lock::release_call(y));
  const long long below = before - 1'000'000'000;  // a token of another name, behind the clock
  for (const char* small : {"1", "1000000000000000"}) {
    SCOPED_TRACE(small);
    ASSERT_TRUE(server_->command({"SET", std::string(lock::kFenceFloorKey), small}));
    const lock::HoldId x{"x", OwnerToken("b"), "c2.1", lock::HoldKind::write};
    EXPECT_EQ(raise(x, below), -1);
    EXPECT_EQ(get(std::string(lock::kFenceFloorKey)), small) << "raised below the clock";
    const auto raised = eval(lock::floor_raise_call(static_cast<std::uint64_t>(below)));
    ASSERT_TRUE(raised && raised->type == REDIS_REPLY_INTEGER);
    EXPECT_EQ(raised->integer, 0) << "a count at or below 10^15 is none";
    EXPECT_EQ(get(std::string(lock::kFenceFloorKey)), small) << "raised below the clock";
    // By the node's counter (the name's, which the first grant wrote, would carry the name).
    const lock::HoldId again{"y", OwnerToken("a"), std::string("c1.") + (small[1] ? "3" : "2"),
                             lock::HoldKind::write};
    const auto r = eval(lock::acquire_call(again, 10s, std::nullopt, lock::WriterWait{}, 0, "",
                                           lock::TokenCounter::node));
    ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER);
    EXPECT_GT(r->integer, before) << "the name's token went down";
    (void)eval(lock::release_call(again));
  }
  // Above the clock the raise still writes the floor.
  ASSERT_TRUE(server_->command({"SET", std::string(lock::kFenceFloorKey), "1"}));
  const lock::HoldId z{"z", OwnerToken("c"), "c3.1", lock::HoldKind::write};
  EXPECT_EQ(raise(z, 4'000'000'000'000'000LL), -1);
  EXPECT_EQ(get(std::string(lock::kFenceFloorKey)), "4000000000000000");
}

// A floor that counts nothing (lost, or the 1 a plain INCR leaves) beside a name's counter that
// lives on (a token a second ago): the node counted every name from its clock, and writing the
// floor from that name's token alone took every other name's next count down to it (the second
// review of the 10^15 rule; on one node, or with fair mode, the next holder of another name got
// a token below its last). The floor is written at least the clock, by a grant by the name's
// counter (acquire.lua) and by a raise (fence_raise.lua).
TEST_F(FenceRaiseScriptTest, ALostFloorIsWrittenAtLeastTheClockBesideANamesCounter) {
  const auto by_node = [&](const lock::HoldId& h) {
    const auto r = eval(lock::acquire_call(h, 10s, std::nullopt, lock::WriterWait{}, 0, "",
                                           lock::TokenCounter::node));
    return r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
  };
  for (const char* lost : {"", "1"}) {
    SCOPED_TRACE(*lost ? "a floor of 1" : "no floor");
    const lock::HoldId b{"b", OwnerToken("b"), std::string("c2.") + (*lost ? "2" : "1"),
                         lock::HoldKind::write};
    const long long before = by_node(b);  // the clock, about now
    ASSERT_GT(before, 1'000'000'000'000'000LL);
    (void)eval(lock::release_call(b));
    const long long second_ago = before - 1'000'000;  // a token of "a" handed out then
    for (int step = 0; step < 2; ++step) {
      (void)server_->command({"DEL", std::string(lock::kFenceFloorKey)});
      if (*lost) {
        ASSERT_TRUE(server_->command({"SET", std::string(lock::kFenceFloorKey), lost}));
      }
      ASSERT_TRUE(server_->command(
          {"SET", lock::fence_key("a"), std::to_string(second_ago), "PX", "10000"}));
      const lock::HoldId a{"a", OwnerToken("a"), "c1." + std::to_string(step + (*lost ? 3 : 1)),
                           lock::HoldKind::write};
      const long long answer = step == 0 ? grant(a) : raise(a, second_ago + 5);
      EXPECT_EQ(answer, step == 0 ? second_ago + 1 : -1) << "by the name's counter; not here";
      (void)eval(lock::release_call(a));
      const lock::HoldId next{"b", OwnerToken("b"), "c3." + std::to_string(step) + lost,
                              lock::HoldKind::write};
      EXPECT_GT(by_node(next), before) << (step == 0 ? "after the grant" : "after the raise");
      (void)eval(lock::release_call(next));
    }
  }
}

// The bound is one for every script: a floor of exactly 10^15 counts nothing for the node's
// counter's INCR too (the review found acquire.lua tested the INCR's answer, 10^15 + 1, against
// the bound, and counted on from it where acquire_batch.lua counted from the clock).
TEST_F(FenceRaiseScriptTest, AFloorOfExactlyTenToTheFifteenthIsNone) {
  ASSERT_TRUE(server_->command({"SET", std::string(lock::kFenceFloorKey), "1000000000000000"}));
  const lock::HoldId hold{"job", OwnerToken("a"), "c1.1", lock::HoldKind::write};
  const auto r = eval(lock::acquire_call(hold, 10s, std::nullopt, lock::WriterWait{}, 0, "",
                                         lock::TokenCounter::node));
  ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER);
  EXPECT_GT(r->integer, 1'000'000'000'000'001LL) << "counted on from a floor of 10^15";
  // A floor just above it that INCR cannot count (no integer) counts, as acquire_batch.lua
  // counts it (the second review: acquire.lua read it as none).
  (void)eval(lock::release_call(hold));
  ASSERT_TRUE(server_->command({"SET", std::string(lock::kFenceFloorKey), "1000000000000000.5"}));
  const lock::HoldId next{"job", OwnerToken("a"), "c1.2", lock::HoldKind::write};
  const auto n = eval(lock::acquire_call(next, 10s, std::nullopt, lock::WriterWait{}, 0, "",
                                         lock::TokenCounter::node));
  ASSERT_TRUE(n && n->type == REDIS_REPLY_INTEGER);
  EXPECT_EQ(n->integer, 1'000'000'000'000'001LL);
}

}  // namespace
}  // namespace dlock

// SPDX-License-Identifier: MIT
// Issue 12: the paths by which two owners could hold one lock, or a fencing token be handed out
// twice, on real servers. Each test failed on cb1033c.
#include <thread>

#include "scripts/script.h"
#include "support/cluster_fixture.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::eventually;

class Issue12Test : public test::ClusterTest {
 protected:
  static LockOptions other_owner() { return fixed(10s, "other-owner"); }
  // Key patterns of the default user on node i: lets a test make a script refuse to run there
  // (ACL checks a script's KEYS before running it), as if the call never reached the node.
  void allow_keys(std::size_t i, const std::vector<std::string>& patterns) {
    std::vector<std::string> args{"ACL", "SETUSER", "default", "resetkeys"};
    for (const auto& p : patterns) args.push_back("~" + p);
    auto r = (*nodes_)[i].command(args);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << (r ? r->str : "no reply");
  }
  void allow_all_keys(std::size_t i) { allow_keys(i, {"*"}); }
  std::int64_t counter(std::size_t i, const std::string& key) {
    auto r = (*nodes_)[i].command({"GET", key});
    return r && r->type == REDIS_REPLY_STRING ? std::stoll(r->str) : 0;
  }
};

// Defect 1, through extend(): a shorter inner lease re-armed the shared key with its own ttl.
TEST_P(Issue12Test, ExtendingAShorterInnerLeaseNeverShortensTheOuterLock) {
  Client client = make_client();
  Client rival = make_client();
  auto outer = client.try_lock("job", fixed(8s));
  ASSERT_TRUE(outer) << outer.error().message();
  auto inner = client.try_lock("job", fixed(300ms));
  ASSERT_TRUE(inner) << inner.error().message();
  ASSERT_TRUE(inner->extend());
  ASSERT_TRUE(inner->unlock());
  std::this_thread::sleep_for(900ms);
  ASSERT_TRUE(outer->is_held());
  auto stolen = rival.try_lock("job", other_owner());
  EXPECT_FALSE(stolen) << "two owners hold 'job' while the outer lease is valid";
}

// Defect 1, through the watchdog: a renewed inner lease re-armed the key with its short ttl.
TEST_P(Issue12Test, RenewingAShorterInnerLeaseNeverShortensTheOuterLock) {
  Client client = make_client();
  Client rival = make_client();
  auto outer = client.try_lock("job", fixed(8s));
  ASSERT_TRUE(outer) << outer.error().message();
  auto inner = client.try_lock("job", renewed(300ms));
  ASSERT_TRUE(inner) << inner.error().message();
  std::this_thread::sleep_for(400ms);  // several renewals of the inner lease
  ASSERT_TRUE(inner->unlock());
  std::this_thread::sleep_for(900ms);
  ASSERT_TRUE(outer->is_held());
  auto stolen = rival.try_lock("job", other_owner());
  EXPECT_FALSE(stolen) << "two owners hold 'job' while the outer lease is valid";
}

// A longer inner lease keeps the key alive for its own ttl after the outer one ends.
TEST_P(Issue12Test, LongerInnerLeaseOutlivesTheOuterOne) {
  Client client = make_client();
  Client rival = make_client();
  auto outer = client.try_lock("job", fixed(300ms));
  ASSERT_TRUE(outer);
  auto inner = client.try_lock("job", fixed(8s));
  ASSERT_TRUE(inner) << inner.error().message();
  EXPECT_EQ(inner->fencing_token(), outer->fencing_token());
  std::this_thread::sleep_for(900ms);
  EXPECT_FALSE(outer->is_held());
  ASSERT_TRUE(inner->is_held());
  EXPECT_FALSE(rival.try_lock("job", other_owner()));
  EXPECT_FALSE(outer->unlock());  // expired: lock_lost, and the inner hold is untouched
  EXPECT_FALSE(rival.try_lock("job", other_owner()));
  ASSERT_TRUE(inner->unlock());
  expect_released_everywhere("job");
}

// Defect 2: a failed reentrant attempt released the outer hold on nodes where its acquire
// never ran. ACL makes the acquisition's scripts refuse to run on a quorum of nodes.
TEST_P(Issue12Test, FailedReentrantAttemptNeverReleasesTheOuterHold) {
  Client client = make_client();
  Client rival = make_client();
  auto outer = client.try_lock("job", fixed(8s));
  ASSERT_TRUE(outer) << outer.error().message();
  // On a quorum: only the lock key and the queue keys (not the fencing counters).
  for (std::size_t i = 0; i < quorum(); ++i) {
    allow_keys(i, {"job", "dlock:queue*", "dlock:readers:*", "dlock:boots", "dlock:max-ttl"});
  }
  auto inner = client.try_lock("job", fixed(1s));
  if (inner) {
    ASSERT_TRUE(inner->unlock());
  }
  // Now nothing at all on a quorum: the reentrant attempt cannot succeed.
  for (std::size_t i = 0; i < quorum(); ++i) allow_keys(i, {"nothing-here"});
  auto refused = client.try_lock("job", fixed(1s));
  EXPECT_FALSE(refused);
  for (std::size_t i = 0; i < size(); ++i) allow_all_keys(i);

  expect_held_everywhere("job");
  ASSERT_TRUE(outer->is_held());
  auto stolen = rival.try_lock("job", other_owner());
  EXPECT_FALSE(stolen) << "two owners hold 'job' while the outer lease is valid";
  ASSERT_TRUE(outer->unlock());
  expect_released_everywhere("job");
}

// Defect 3: a hold of the owner left on a minority (its release was lost) passed for
// reentrancy: the token was not raised on a majority, and the stale key never went away.
TEST_P(Issue12Test, StaleHoldOnOneNodeIsTakenOverWithARaisedToken) {
  Client client = make_client();
  const std::string fence = "dlock:fence:{job}";
  auto first = client.try_lock("job", fixed(10s));
  ASSERT_TRUE(first);
  const auto previous = first->fencing_token().value();
  // The release does not reach the last node (ACL refuses the script there): the owner's hold
  // stays there, as a lost release leaves it. On one node the release fails outright.
  auto& last = (*nodes_)[size() - 1];
  allow_keys(size() - 1, {"dlock:*"});
  (void)first->unlock();
  allow_all_keys(size() - 1);
  ASSERT_TRUE(last.exists("job"));
  // The counters of the issue: 11, 11, 10, 10, 10 above the first token (one node: 11).
  for (std::size_t i = 0; i < size(); ++i) {
    const std::uint64_t value = previous + 10 + (i < (size() + 1) / 2 - 1 || size() == 1 ? 1 : 0);
    (*nodes_)[i].command({"SET", fence, std::to_string(value), "PX", "60000"});
  }

  auto lease = client.try_lock("job", fixed(10s));
  ASSERT_TRUE(lease) << lease.error().message();
  const auto token = lease->fencing_token().value();
  EXPECT_GT(token, previous + 11) << "a token at most as large as an earlier one";
  // A node counts with its own counter, the floor (issue 32), and takes the name's away; a raise
  // raises the floor.
  std::size_t holding = 0;
  for (std::size_t i = 0; i < size(); ++i) {
    holding += counter(i, "dlock:fence-floor") >= static_cast<std::int64_t>(token) ? 1 : 0;
  }
  EXPECT_GE(holding, quorum()) << "the token must be on a majority of counters";
  ASSERT_TRUE(lease->unlock());
  expect_released_everywhere("job");  // the stale hold too
}

// Defect 3, the other half: only this client's own live lease makes an acquisition reentrant.
// Another client naming the same owner is a second contender, not the same hold: it waits.
TEST_P(Issue12Test, AnotherClientNamingTheSameOwnerIsNotReentrant) {
  Client client = make_client();
  auto outer = client.try_lock("job", fixed(8s, "shared-owner"));
  ASSERT_TRUE(outer);
  Client other = make_client();
  auto second = other.try_lock("job", fixed(8s, "shared-owner"));
  ASSERT_FALSE(second) << "two clients hold 'job' at once under one owner name";
  EXPECT_TRUE(second.error().is(errc::lock_held)) << second.error().message();
  ASSERT_TRUE(outer->extend());
  // Handing over across processes stays possible: release by owner, then take it.
  ASSERT_TRUE(other.unlock("job", OwnerToken("shared-owner")));
  EXPECT_TRUE(other.try_lock("job", fixed(8s, "shared-owner")));
}

// Defect 6: every name ever locked left a counter key behind, forever.
TEST_P(Issue12Test, NamesLeaveNoKeysBehindAndTokensStillGrow) {
  Client client = make_client();
  auto a = client.try_lock("name-a", fixed(2s));
  ASSERT_TRUE(a) << a.error().message();
  const auto first = a->fencing_token();
  ASSERT_TRUE(a->unlock());
  for (int i = 0; i < 500; ++i) {
    // 2 s, not 300 ms: what is tested is the keys left behind, and with 32 tests at once on 2
    // cores a quorum of 5 came after 323 ms ("too late for a ttl of 300 ms").
    auto l = client.try_lock("order-" + std::to_string(i), fixed(2s));
    ASSERT_TRUE(l) << l.error().message();
    ASSERT_TRUE(l->unlock());
  }
  // Per node: dlock's bookkeeping (boots, max-ttl, fence floor) and nothing per name.
  for (std::size_t i = 0; i < size(); ++i) {
    EXPECT_TRUE(eventually([&] { return (*nodes_)[i].command({"DBSIZE"})->integer <= 3; }, 5s))
        << (*nodes_)[i].command({"DBSIZE"})->integer << " keys left on node " << i;
  }
  auto again = client.try_lock("name-a", fixed(2s));
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_GT(again->fencing_token(), first) << "tokens must grow per name across expiry";
}

// Defect 7: a fair holder stayed queued on the nodes that did not grant it.
TEST_P(Issue12Test, FairHolderLeavesTheQueueWhereItWasNotGranted) {
  if (size() == 1) GTEST_SKIP() << "needs a node that does not grant";
  Client client = make_client();
  LockOptions fair = fixed(10s, "holder");
  fair.fair = true;
  auto holder = client.try_lock("job", fair);
  ASSERT_TRUE(holder);
  LockOptions waiter_options = fixed(10s, "waiter");
  waiter_options.fair = true;
  Client waiter_client = make_client();
  Result<Lease> waited = Error(errc::cancelled, "not yet");
  std::thread waiter([&] { waited = waiter_client.lock("job", 20s, waiter_options); });
  auto queued = [&](std::size_t i) {
    return (*nodes_)[i].command({"ZCARD", "dlock:queue:{job}"})->integer;
  };
  ASSERT_TRUE(eventually([&] { return queued(size() - 1) == 1; }));
  // The last node will not grant the waiter: another library holds 'job' there.
  auto& last = (*nodes_)[size() - 1];
  last.command({"DEL", "job"});
  last.command({"SET", "job", "another-library", "PX", "60000"});
  ASSERT_TRUE(holder->unlock());
  waiter.join();
  ASSERT_TRUE(waited) << waited.error().message();
  EXPECT_EQ(queued(size() - 1), 0) << "the holder is still in line where it was refused";
}

// Defect 4: restart protection depended on how a client spelled a node.
class Issue12NamingTest : public test::ClusterTest {
 protected:
  static constexpr const char* kMapped = "[::ffff:127.0.0.1]";
  Client client_with(const std::vector<std::string>& urls) {
    ClientOptions options;
    options.nodes = urls;
    options.node_timeout = 500ms;
    auto c = Client::create(options);
    EXPECT_TRUE(c) << c.error().message();
    return std::move(c).value();
  }
  std::string url(std::size_t i, const std::string& host) {
    return "redis://" + host + ":" + std::to_string((*nodes_)[i].port());
  }
  // hello.lua run by hand on node `node`, naming `run_ids` (each with uptime 0) in a set of
  // size() nodes, with a largest ttl of 10 s.
  // hello.lua 'greet' (uptime 0 for every boot), or 'join' (no boot known to have happened
  // while the set was in use).
  test::ReplyPtr hello(std::size_t node, const std::vector<std::string>& run_ids,
                       const std::string& mode = "greet") {
    std::vector<std::string> args{"EVAL",
                                  std::string(scripts::hello().source),
                                  "3",
                                  "dlock:boots",
                                  "dlock:max-ttl",
                                  "dlock:fence-floor",
                                  "10000",
                                  std::to_string(size()),
                                  mode};
    for (const auto& id : run_ids) args.insert(args.end(), {id, mode == "join" ? "-1" : "0"});
    return (*nodes_)[node].command(args);
  }
};

TEST_P(Issue12NamingTest, RestartedNodesAreKeptOutWhateverNameAClientUses) {
  auto all = [&](const std::string& host) {
    std::vector<std::string> urls;
    for (std::size_t i = 0; i < size(); ++i) urls.push_back(url(i, host));
    return urls;
  };
  Client a = client_with(all("127.0.0.1"));
  // The holder gets nodes 0, 1, 2 (another library holds 3 and 4 until it releases them, by a
  // DEL: a lock that expired after 300 ms could end before a slow acquisition reached them).
  for (std::size_t i = 3; i < size(); ++i) {
    (*nodes_)[i].command({"SET", "job", "other-library", "PX", "60000"});
  }
  // 30 s: the restart below took most of a 10 s lease under ThreadSanitizer on a loaded
  // machine, and a grant after the lease ended read as two holders (RestartTest likewise).
  auto held = a.try_lock("job", fixed(30s, "first"));
  ASSERT_TRUE(held) << held.error().message();
  for (std::size_t i = 3; i < size(); ++i) (*nodes_)[i].command({"DEL", "job"});
  ASSERT_TRUE(!(*nodes_)[3].exists("job") && !(*nodes_)[4].exists("job"));
  // One node of the holder's quorum restarts empty: with nodes 3 and 4 it would make a quorum.
  (*nodes_)[2].restart(/*keep_data=*/false);
  // Another spelling of the same servers: an IPv4-mapped IPv6 address.
  Client b = client_with(all(kMapped));
  // Time left for the contender's whole attempt (its first greeting included) inside the lease.
  ASSERT_GT(held->validity(), 3s) << "the holder's lease is about to end: too slow to contend";
  auto stolen = b.try_lock("job", fixed(10s, "second"));
  ASSERT_FALSE(stolen) << "mutual exclusion broken: the restarted node granted the lock";
  EXPECT_NE(stolen.error().message().find("restarted recently"), std::string::npos)
      << stolen.error().message();
  EXPECT_TRUE(held->is_held());
}

// A node used alone first, then in a set of five, does not take the other four for restarted
// nodes (it was never in use in this set: it vouches for nothing).
TEST_P(Issue12NamingTest, NodeUsedAloneBeforeDoesNotQuarantineItsNewPeers) {
  Client alone = client_with({url(0, "127.0.0.1")});
  ASSERT_TRUE(alone.try_lock("solo", fixed(10s)));
  std::vector<std::string> urls;
  for (std::size_t i = 0; i < size(); ++i) urls.push_back(url(i, "127.0.0.1"));
  Client five = client_with(urls);
  auto lease = five.try_lock("job", fixed(10s));
  EXPECT_TRUE(lease) << lease.error().message();
}

// Found later by the simulation (seed 2300480, docs/simulation.md finding 8; failed on 71b16f5):
// a client that identifies only a bare quorum (one node's INFO failed) names a restarted node's
// new boot beside too few known ones. A node counted only the run_ids named now, so every node
// that remembered stayed silent and the restarted node voted at once. hello.lua on real
// servers: every node of the set is greeted, then node 1 is greeted with node 0's new boot and
// two known ones (3 of 5).
TEST_P(Issue12NamingTest, GreetingThatNamesABareQuorumStillReportsARestart) {
  const std::vector<std::string> boots{"boot-0", "boot-1", "boot-2", "boot-3", "boot-4"};
  for (std::size_t i = 0; i < size(); ++i) {
    auto r = hello(i, boots);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == boots.size() + 3)
        << (r && r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
    EXPECT_EQ(r->element[1]->integer, 0) << "not in use before it joined";
    for (std::size_t k = 2; k + 1 < r->elements; ++k) EXPECT_EQ(r->element[k]->integer, -1);
    ASSERT_TRUE(hello(i, boots, "join"));
  }
  auto r = hello(1, {"boot-0-restarted", "boot-1", "boot-2"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 6)
      << (r && r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
  EXPECT_EQ(r->element[1]->integer, 1);
  EXPECT_GE(r->element[2]->integer, 0) << "node 1 did not report node 0's new boot";
  EXPECT_EQ(r->element[3]->integer, -1);
  EXPECT_EQ(r->element[4]->integer, -1);
}

// Found by review (failed on b202c53): clients that stay connected greet no more, so after a day
// every record is old. The greeting that a restart finally causes dropped them all before the
// count, and nobody vouched for the restarted node. hello.lua on a real server, with the records
// aged by hand.
TEST_P(Issue12NamingTest, RecordsOlderThanADayStillMakeANodeVouch) {
  const std::vector<std::string> boots{"boot-0", "boot-1", "boot-2", "boot-3", "boot-4"};
  ASSERT_TRUE(hello(0, boots, "join"));
  for (const auto& id : boots) (*nodes_)[0].command({"HSET", "dlock:boots", id, "1 0"});
  auto r = hello(0, {"boot-0", "boot-1-restarted", "boot-2", "boot-3", "boot-4"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 8)
      << (r && r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
  EXPECT_GE(r->element[3]->integer, 0) << "node 0 did not report node 1's new boot";
}

TEST_P(Issue12NamingTest, OneServerNamedTwiceVotesOnce) {
  Client c = client_with({url(0, "127.0.0.1"), url(0, kMapped), url(1, "127.0.0.1")});
  (*nodes_)[1].kill9();
  auto lease = c.try_lock("job", fixed(10s));
  EXPECT_FALSE(lease) << "one server counted as two votes of three";
}

INSTANTIATE_TEST_SUITE_P(Nodes, Issue12Test, ::testing::Values(1, 5), test::node_count_name);
INSTANTIATE_TEST_SUITE_P(Nodes, Issue12NamingTest, ::testing::Values(5), test::node_count_name);

}  // namespace
}  // namespace dlock

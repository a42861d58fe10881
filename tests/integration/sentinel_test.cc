// SPDX-License-Identifier: MIT
// A Sentinel-managed master as a lock node (redis-sentinel://), on real sentinels: locks go to
// the master the sentinels name and never to a replica; a failover while a lock is held keeps
// the lock if the promoted replica has its key and never gives it to a second owner if the
// replica lacks it; a waiter follows the failover; clear errors for a wrong name or password.
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <thread>

#include "lock/keys.h"
#include "redis_command.h"
#include "support/lock_clients.h"
#include "support/redis_server.h"
#include "support/sentinel_set.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;

using test::fixed;
using test::renewed;

// A generous node timeout: the first grant of each ttl waits for the replica to confirm its
// record (WAIT, within the node timeout), and with clusters starting beside it on 2 cores a
// fresh set's replica did not answer within 500 ms, now and then. WAIT returns as soon as the
// replica confirms, so it costs nothing when all is well.
Client client_of(const std::string& url) {
  return test::client_of({url}, std::chrono::seconds(2));
}

class SentinelNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    set_ = std::make_unique<test::SentinelSet>(1);
  }

  bool on_server(std::size_t i, const std::string& key) const {
    auto r = set_->command(i, {"EXISTS", key});
    return r && r->integer == 1;
  }

  // Kills the master, lets `paused` (a replica) run again, and waits for the sentinels to
  // promote a replica; meanwhile `contender` never gets `name` while `lease` is valid.
  std::size_t fail_over(const std::string& name, Client& contender, const Lease& lease,
                        std::size_t paused = test::SentinelSet::npos) {
    const std::size_t old = set_->master();
    const auto killed = std::chrono::steady_clock::now();
    set_->server(old).kill9();
    if (paused != test::SentinelSet::npos) set_->server(paused).resume();
    const auto limit = killed + 60s;
    while (!set_->set().wait_for_new_master(old, 200ms)) {
      EXPECT_LT(std::chrono::steady_clock::now(), limit) << "no replica was promoted";
      if (std::chrono::steady_clock::now() >= limit) return test::SentinelSet::npos;
      if (lease.validity() > 0ms) {
        EXPECT_FALSE(contender.try_lock(name, fixed(5s))) << "a second holder during the failover";
      }
    }
    failover_took_ = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - killed);
    return set_->master();
  }

  // What a failure of a test after fail_over() should say: the sentinels elect the failover's
  // leader once, and when their votes split they try again only after twice the failover
  // timeout (ASplitVoteIsRetriedWithinTheLeaseHeldThroughAFailover).
  std::string after_the_failover() const {
    if (failover_took_ == std::chrono::milliseconds::zero()) return {};  // not by fail_over()
    return " (the failover took " + std::to_string(failover_took_.count()) + " ms)";
  }

  // Replica `i` paused and its link to the master cut (the master drops it at once): it misses
  // every write from now on, and may still be promoted with what it had.
  bool cut_off(std::size_t i) {
    set_->server(i).pause();
    auto cut = set_->command(set_->master(), {"CLIENT", "KILL", "TYPE", "replica"});
    return cut && cut->integer == 1;
  }

  // Calls of `command` (INFO commandstats) that server `i` ran so far.
  long long calls_of(std::size_t i, const std::string& command) const {
    auto stats = set_->command(i, {"INFO", "commandstats"});
    if (!stats || stats->type != REDIS_REPLY_STRING) return -1;
    const std::string text = stats->str;
    const auto at = text.find("cmdstat_" + command + ":calls=");
    if (at == std::string::npos) return 0;
    return std::stoll(text.substr(at + command.size() + 15));
  }

  // Nobody else gets `name` while `lease` is valid, tried every 200 ms until it ends; `why`
  // what a second holder would mean.
  static void expect_no_second_holder(const std::string& name, Client& contender,
                                      const Lease& lease, const std::string& why = {}) {
    while (lease.validity() > 0ms) {
      auto other = contender.try_lock(name, fixed(1s));
      ASSERT_FALSE(other && lease.validity() > 0ms)
          << "two holders of " << name << why << "; " << lease.validity().count()
          << " ms of validity left";
      std::this_thread::sleep_for(200ms);
    }
  }

  // `lease` stays held for 20 s, and `contender` never gets `name` meanwhile.
  void expect_kept(const std::string& name, Client& contender, const Lease& lease) const {
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < until) {
      ASSERT_TRUE(lease.is_held())
          << "the holder lost a lock whose key survived" << after_the_failover();
      EXPECT_FALSE(contender.try_lock(name, fixed(5s)));
      std::this_thread::sleep_for(500ms);
    }
  }

  // The master's writes so far replicated, then replica 1 cut off (cut_off): what it will have
  // if it is promoted.
  static constexpr std::size_t kReplica = 1;
  bool replicated_then_cut_off() {
    if (!set_->replicated(0)) {
      ADD_FAILURE() << "the master's writes did not reach the replica";
      return false;
    }
    return cut_off(kReplica);
  }

  // fail_over() to the replica cut off before, which lacks `name`'s key.
  void fail_over_to_the_cut_off_replica(const std::string& name, Client& contender,
                                        const Lease& lease) {
    const std::size_t promoted = fail_over(name, contender, lease, kReplica);
    ASSERT_EQ(promoted, kReplica);
    EXPECT_FALSE(on_server(promoted, name)) << "the promoted replica lacks the key";
  }

  // The lease the tests below hold through a failover, renewed every third of it: at the kill
  // it has two thirds left, which must outlast a failover whose leader election split its votes
  // once (see the next test). Its quarantine afterwards is as long, so no longer than that.
  static constexpr std::chrono::milliseconds kThroughAFailover = 24s;

  std::unique_ptr<test::SentinelSet> set_;
  std::chrono::milliseconds failover_took_{0};
};

// When the sentinels' votes split, they elect again only after twice their failover timeout:
// such a failover takes down-after + 2 x failover-timeout and some 5 s more (the sentinels
// agree that the master is down, wait up to 1 s at random before each try, elect, promote and
// see the promotion). With the sandbox's 10 s of before that was 23 s (seen in CI), more than
// the 15 s lease the tests then held through a failover: they failed with no fault of the
// library. Every sentinel of the set must be configured so.
TEST_F(SentinelNodeTest, ASplitVoteIsRetriedWithinTheLeaseHeldThroughAFailover) {
  const auto& options = set_->set().options();
  for (std::size_t i = 0; i < options.sentinels; ++i) {
    auto master = sandbox::redis_command(set_->set().sentinel(i).port(), "",
                                         {"SENTINEL", "MASTER", options.master_name});
    ASSERT_TRUE(master && master->type == REDIS_REPLY_ARRAY) << "sentinel " << i;
    std::map<std::string, long long> fields;
    for (std::size_t f = 0; f + 1 < master->elements; f += 2) {
      fields[master->element[f]->str] = std::atoll(master->element[f + 1]->str);
    }
    EXPECT_GT(fields["failover-timeout"], 0) << "sentinel " << i;
    EXPECT_GT(fields["down-after-milliseconds"], 0) << "sentinel " << i;
    const std::chrono::milliseconds split_vote_failover{fields["down-after-milliseconds"] +
                                                        2 * fields["failover-timeout"] + 5000};
    EXPECT_LE(split_vote_failover, kThroughAFailover / 3 * 2)
        << "sentinel " << i << ": a failover after a split vote takes about "
        << split_vote_failover.count() << " ms";
  }
}

TEST_F(SentinelNodeTest, LocksGoToTheMasterAndNeverToAReplica) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  const std::size_t master = set_->master();
  ASSERT_EQ(master, 0u);
  FencingToken last;
  for (int i = 0; i < 5; ++i) {
    auto lease = a.try_lock("job", fixed(10s));
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_GT(lease->fencing_token(), last);
    last = lease->fencing_token();
    EXPECT_FALSE(b.try_lock("job", fixed(10s)));
    EXPECT_TRUE(on_server(master, "job"));
    ASSERT_TRUE(lease->unlock());
  }
  auto status = a.status("job");
  ASSERT_TRUE(status) << status.error().message();
  EXPECT_FALSE(status->held);
  // The replica ran no script of ours: it only received the master's writes.
  auto stats = set_->command(1, {"INFO", "commandstats"});
  ASSERT_TRUE(stats && stats->type == REDIS_REPLY_STRING);
  const std::string text = stats->str;
  EXPECT_EQ(text.find("cmdstat_evalsha"), std::string::npos) << text;
  EXPECT_EQ(text.find("cmdstat_eval:"), std::string::npos) << text;
}

// The replica had the key: the holder keeps its lock across the failover (its renewals count
// on the new master even while the node is quarantined), and nobody else gets it.
TEST_F(SentinelNodeTest, TheHolderKeepsALockTheReplicaHad) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  auto lease = a.try_lock("kept", renewed(kThroughAFailover));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(set_->replicated(set_->master())) << "the key reached the replica";
  const std::size_t promoted = fail_over("kept", b, *lease);
  ASSERT_EQ(promoted, 1u);
  ASSERT_NO_FATAL_FAILURE(expect_kept("kept", b, *lease));
  EXPECT_TRUE(on_server(promoted, "kept"));
  EXPECT_TRUE(lease->unlock());
  EXPECT_FALSE(on_server(promoted, "kept"));
}

// The promoted replica lacks the key (the master died before the write reached it): nobody
// else holds the lock before the holder's validity is over, the holder is told it lost it, and
// the lock is free once the quarantine has passed.
TEST_F(SentinelNodeTest, ALockTheReplicaLostIsNeverHeldTwice) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  // Greeted before the cut, and the greeting's boot records and the record of the lease's ttl
  // replicated: the replica lacks only the lock's key. (A replica without the records could not
  // tell it was promoted: a lone node's failover within moments of its very first greeting,
  // docs/safety.md. A ttl new to the master is refused while the replica is cut off:
  // ALossyFailoverLosingANewTtlWithTheLock.)
  auto warm_up = a.try_lock("warm-up", fixed(kThroughAFailover));
  ASSERT_TRUE(warm_up) << warm_up.error().message();
  ASSERT_TRUE(warm_up->unlock());
  ASSERT_TRUE(replicated_then_cut_off());
  auto lease = a.try_lock("lost-on-failover", renewed(kThroughAFailover));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_NO_FATAL_FAILURE(fail_over_to_the_cut_off_replica("lost-on-failover", b, *lease));

  const auto limit = std::chrono::steady_clock::now() + 60s;
  while (lease->validity() > 0ms && !lease->lost()) {
    ASSERT_LT(std::chrono::steady_clock::now(), limit);
    auto other = b.try_lock("lost-on-failover", fixed(5s));
    ASSERT_FALSE(other) << "two holders: the second got the lock from the promoted replica";
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(test::eventually([&] { return lease->lost(); }, 30s)) << "the holder is told";
  EXPECT_TRUE(test::eventually(
      [&] { return static_cast<bool>(b.try_lock("lost-on-failover", fixed(5s))); }, 60s));
}

// The sibling of ClusterFailoverTest.ALossyFailoverOfTheHomeMasterLosingANewTtl: the master
// holds the lock's key and every record of its ttl (dlock:max-ttl), and the ttl (20 s, not
// renewed) is new to it. A lossy failover loses them together: before, the promoted replica's
// quarantine lasted the contender's 1 s ttl, and the contender got the lock beside the holder.
// Now a grant of a ttl new there counts only once its record reached every replica Sentinel
// may promote: with the replica cut off, the attempt is refused, says why, and leaves nothing
// behind. The promise either way: refused clearly, or granted and never held twice while valid.
TEST_F(SentinelNodeTest, ALossyFailoverLosingANewTtlWithTheLock) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  auto warm_a = a.try_lock("warm-up", fixed(1s));
  ASSERT_TRUE(warm_a) << warm_a.error().message();
  auto warm_b = b.try_lock("warm-up-b", fixed(1s));
  ASSERT_TRUE(warm_b) << warm_b.error().message();
  ASSERT_TRUE(replicated_then_cut_off());
  const std::string name = "new-ttl";
  auto lease = a.try_lock(name, fixed(20s));
  if (!lease) {
    const std::string why = lease.error().message();
    EXPECT_NE(why.find("replicas of the master confirmed the record of a new ttl"),
              std::string::npos)
        << why;
    EXPECT_FALSE(on_server(set_->master(), name)) << "the refused attempt left its key behind";
    set_->server(kReplica).resume();
    return;
  }
  ASSERT_NO_FATAL_FAILURE(fail_over_to_the_cut_off_replica(name, b, *lease));
  expect_no_second_holder(name, b, *lease,
                          ": the promoted replica's quarantine ended before the lease it lost");
}

// The cheap side: a ttl the replica confirmed is not waited for again while its record lives.
// A 20 s lease granted while the replica listens waits for it once; the next lease of that ttl,
// granted once the replica is cut off, is granted at once and is still never held twice after
// a lossy failover (the promoted replica has the record: its quarantine outlasts the lease).
TEST_F(SentinelNodeTest, ATtlTheReplicaConfirmedIsNotWaitedForAgainAndStillProtects) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  auto warm_b = b.try_lock("warm-up-b", fixed(1s));
  ASSERT_TRUE(warm_b) << warm_b.error().message();
  auto first = a.try_lock("first", fixed(20s));
  ASSERT_TRUE(first) << first.error().message();
  ASSERT_TRUE(first->unlock());
  ASSERT_TRUE(replicated_then_cut_off());
  auto lease = a.try_lock("second", fixed(20s));
  ASSERT_TRUE(lease) << "a ttl the replica has was waited for again: " << lease.error().message();
  ASSERT_NO_FATAL_FAILURE(fail_over_to_the_cut_off_replica("second", b, *lease));
  expect_no_second_holder("second", b, *lease,
                          ": the promoted replica's quarantine ended before the lease it lost");
}

// extend() to a larger ttl is a renewal round: its record of the ttl (max_ttl_raise) counts on
// a node whose master holds the lock's key only once the replicas confirmed it, as a grant's
// does (docs/safety.md, "A ttl new to the master that holds the lock"). With the replica
// listening the extension waits for it and counts; with the replica cut off it is refused, and
// the lease keeps the validity it had, which the promoted replica's quarantine covers. Before,
// the extension counted on the master alone: after a lossy failover the promoted replica knew
// only the smaller ttl and a second owner got the lock with 20 s of the extension left.
TEST_F(SentinelNodeTest, AnExtensionToALargerTtlWaitsForTheReplicaOrIsRefused) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  auto warm_b = b.try_lock("warm-up-b", fixed(1s));
  ASSERT_TRUE(warm_b) << warm_b.error().message();
  auto lease = a.try_lock("grown", fixed(3s));
  ASSERT_TRUE(lease) << lease.error().message();
  const long long waits = calls_of(set_->master(), "wait");
  auto confirmed = lease->extend(8s);
  ASSERT_TRUE(confirmed) << "extension with the replica listening: " << confirmed.error().message();
  EXPECT_GT(calls_of(set_->master(), "wait"), waits) << "a larger ttl counted without WAIT";
  ASSERT_TRUE(replicated_then_cut_off());
  const auto had = lease->validity();
  const auto asked = std::chrono::steady_clock::now();
  auto grown = lease->extend(30s);
  ASSERT_FALSE(grown) << "extended to 30 s with its replica cut off; validity "
                      << lease->validity().count() << " ms";
  EXPECT_NE(grown.error().message().find("REPLICAS"), std::string::npos) << grown.error().message();
  // The lease keeps the validity it had: neither extended nor cut short.
  EXPECT_TRUE(lease->is_held()) << "a refused extension lost the lease it had";
  EXPECT_LE(lease->validity(), had);
  EXPECT_GE(lease->validity() + (std::chrono::steady_clock::now() - asked) + 50ms, had);
  const std::size_t promoted = fail_over("grown", b, *lease, kReplica);
  ASSERT_EQ(promoted, kReplica);
  expect_no_second_holder("grown", b, *lease);
}

// A reentrant acquisition of a larger ttl by the same owner is an extension round
// (Holds::join_task -> extend_task), not an acquisition: confirmed on the replica like one, so
// with the replica cut off it is refused and the smaller lease stays as it was. Before, it
// counted on the master alone, and after a lossy failover a second owner got the lock.
TEST_F(SentinelNodeTest, AReentrantLargerTtlWithTheReplicaCutOffIsRefused) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  auto warm_b = b.try_lock("warm-up-b", fixed(1s));
  ASSERT_TRUE(warm_b) << warm_b.error().message();
  auto small = a.try_lock("again", fixed(5s, "owner-a"));
  ASSERT_TRUE(small) << small.error().message();
  ASSERT_TRUE(replicated_then_cut_off());
  auto lease = a.try_lock("again", fixed(30s, "owner-a"));
  ASSERT_FALSE(lease) << "reentrant 30 s with the replica cut off; validity "
                      << lease->validity().count() << " ms";
  EXPECT_NE(lease.error().message().find("REPLICAS"), std::string::npos) << lease.error().message();
  EXPECT_TRUE(small->is_held()) << "a refused reentrant acquisition lost the lease it joined";
  const std::size_t promoted = fail_over("again", b, *small, kReplica);
  ASSERT_EQ(promoted, kReplica);
  expect_no_second_holder("again", b, *small);
}

// Known limit (docs/safety.md, "What it does not cover"), found in review: a replica frozen
// (SIGSTOP, a paused VM) and cut off is flagged s_down after down-after-milliseconds (1 s
// here); from then on it is neither promotable nor connected, so the confirmation of an
// extension to 30 s waits for no replica and counts on the master alone. When the master dies
// 12 s later and the replica thaws, its own link-down time starts only when it notices the
// dead link, so Sentinel's limit of ten times down-after-milliseconds does not hold it back:
// it is promoted knowing only the 8 s ttl, and a second owner gets the lock with about 10 s of
// the extension left (on main before the renewal confirmation too). Kept to pass once closed.
TEST_F(SentinelNodeTest, DISABLED_AnExtensionPastAFrozenReplicaFlaggedDownSurvivesItsPromotion) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  auto warm_b = b.try_lock("warm-up-b", fixed(1s));
  ASSERT_TRUE(warm_b) << warm_b.error().message();
  auto lease = a.try_lock("frozen", fixed(8s));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(replicated_then_cut_off());
  std::this_thread::sleep_for(2500ms);  // s_down after down-after (1 s)
  auto grown = lease->extend(30s);
  ASSERT_TRUE(grown) << "refused: " << grown.error().message();
  std::this_thread::sleep_for(12s);
  ASSERT_GT(lease->validity(), 10s);
  const std::size_t promoted = fail_over("frozen", b, *lease, kReplica);
  ASSERT_EQ(promoted, kReplica);
  expect_no_second_holder("frozen", b, *lease);
}

// WAIT n counts acknowledgements from any n replicas. A replica Sentinel flagged s_down (so not
// promotable) that still replicates and acknowledges must not stand in for the promotable one
// that has nothing: WAIT waits for the promotable and the connected replicas together, here 2,
// of which 1 is connected, so the grant is refused. Were it granted, the failover that promotes
// the lagging replica must still not give the lock to a second owner.
class SentinelTwoReplicasTest : public SentinelNodeTest {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    set_ = std::make_unique<test::SentinelSet>(2);
  }
};

TEST_F(SentinelTwoReplicasTest, AnSDownReplicaThatStillAcksCannotStandInForThePromotableOne) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  auto warm_a = a.try_lock("warm-up", fixed(1s));
  ASSERT_TRUE(warm_a) << warm_a.error().message();
  auto warm_b = b.try_lock("warm-up-b", fixed(1s));
  ASSERT_TRUE(warm_b) << warm_b.error().message();
  const std::size_t m = set_->master();
  ASSERT_TRUE(set_->replicated(m));
  std::size_t lagging = test::SentinelSet::npos, acking = test::SentinelSet::npos;
  for (std::size_t i = 0; i < 3; ++i) {
    if (i == m) continue;
    if (lagging == test::SentinelSet::npos) {
      lagging = i;
    } else {
      acking = i;
    }
  }
  // `acking`: answers the sentinels' PING with NOPERM (s_down), replicates on.
  auto acl = set_->command(acking, {"ACL", "SETUSER", "default", "-ping"});
  ASSERT_TRUE(acl && acl->type != REDIS_REPLY_ERROR) << (acl ? acl->str : "no reply");
  // `lagging`: answers the sentinels, but cannot reconnect to the master.
  auto auth = set_->command(lagging, {"CONFIG", "SET", "masterauth", "bogus"});
  ASSERT_TRUE(auth && auth->type != REDIS_REPLY_ERROR);
  std::this_thread::sleep_for(3500ms);  // s_down after down-after (1 s)
  auto cut = set_->command(m, {"CLIENT", "KILL", "TYPE", "replica"});
  ASSERT_TRUE(cut && cut->integer == 2);
  bool back = false;
  for (int k = 0; k < 100 && !back; ++k) {  // `acking` back on the master
    auto info = set_->command(m, {"INFO", "replication"});
    const std::string text = info && info->str ? std::string(info->str, info->len) : "";
    back = text.find("connected_slaves:1") != std::string::npos &&
           text.find("state=online") != std::string::npos;
    if (!back) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(back) << "the s_down replica did not come back to the master";
  const std::string name = "stand-in";
  auto lease = a.try_lock(name, fixed(20s));
  if (!lease) {
    EXPECT_NE(lease.error().message().find("REPLICAS"), std::string::npos)
        << lease.error().message();
    return;
  }
  set_->server(m).kill9();
  const auto limit = std::chrono::steady_clock::now() + 60s;
  while (!set_->set().wait_for_new_master(m, 200ms)) {
    ASSERT_LT(std::chrono::steady_clock::now(), limit) << "no replica was promoted";
  }
  const std::size_t promoted = set_->master();
  EXPECT_EQ(promoted, lagging);
  EXPECT_FALSE(on_server(promoted, name)) << "the promoted replica lacks the key";
  expect_no_second_holder(
      name, b, *lease, ": WAIT was satisfied by an s_down replica, the promoted one had nothing");
}

// SENTINEL FAILOVER, no server dies: the old master becomes a replica. The client moves to the
// new master (told by +switch-master, or by READONLY), the holder keeps its lock, and once the
// client has moved no lock command reaches the old master again.
TEST_F(SentinelNodeTest, AGracefulFailoverMovesTheNodeOffTheOldMaster) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  auto lease = a.try_lock("moved", renewed(kThroughAFailover));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(set_->replicated(0));
  // A failover the sentinels give up (its promotion not seen within their failover timeout, on
  // a loaded machine) is not tried again by them: the master never went down. Asked again.
  bool moved = false;
  for (int ask = 0; ask < 4 && !moved; ++ask) {
    auto asked =
        sandbox::redis_command(set_->set().sentinel(0).port(), "",
                               {"SENTINEL", "FAILOVER", set_->set().options().master_name});
    ASSERT_TRUE(asked && (asked->type == REDIS_REPLY_STATUS || ask > 0))
        << (asked ? asked->str : "no answer");
    moved = set_->set().wait_for_new_master(0, 15s);
  }
  ASSERT_TRUE(moved) << "no failover in four asks";
  ASSERT_TRUE(test::eventually(
      [&] {
        auto role = set_->command(0, {"ROLE"});
        return role && role->type == REDIS_REPLY_ARRAY &&
               std::string(role->element[0]->str) == "slave";
      },
      30s))
      << "the old master became a replica";
  // The holder keeps the lock, nobody else gets it, and the client works on the new master.
  ASSERT_NO_FATAL_FAILURE(expect_kept("moved", b, *lease));
  EXPECT_TRUE(on_server(1, "moved"));
  auto scripts_on = [&](std::size_t server) {
    auto stats = set_->command(server, {"INFO", "commandstats"});
    const std::string text = stats && stats->type == REDIS_REPLY_STRING ? stats->str : "";
    const auto at = text.find("cmdstat_evalsha:calls=");
    return at == std::string::npos ? 0L : std::atol(text.c_str() + at + 22);
  };
  const long before = scripts_on(0);
  for (int i = 0; i < 5; ++i) {
    auto other = b.lock("after-" + std::to_string(i), 30s, fixed(5s));
    ASSERT_TRUE(other) << other.error().message();
    EXPECT_TRUE(on_server(1, "after-" + std::to_string(i)));
    ASSERT_TRUE(other->unlock());
  }
  EXPECT_TRUE(lease->unlock());
  EXPECT_EQ(scripts_on(0), before) << "a lock command reached the old master after the move";
}

// A waiter's subscription moves to the new master, and it gets the lock once the holder lets
// go there (after the failover's quarantine).
TEST_F(SentinelNodeTest, AWaiterFollowsTheFailover) {
  Client a = client_of(set_->url());
  Client b = client_of(set_->url());
  auto lease = a.try_lock("waited", renewed(kThroughAFailover));
  ASSERT_TRUE(lease) << lease.error().message();
  std::atomic<bool> released{false};
  auto waiter = std::async(std::launch::async, [&] {
    // Far longer than the steps below take when they pass (about 35 s with the quarantine of a 24 s
    // lease): a slow step fails by its own bound, and then `let_go` ends the wait.
    auto got = b.lock("waited", 150s, fixed(10s));
    EXPECT_TRUE(released.load()) << "the waiter got the lock while the holder still had it, or "
                                 << (got ? "(no error)" : got.error().message());
    return got;
  });
  // A step that fails below returns with the waiter still waiting, and the future's destructor
  // would wait for it: the holder lets go first, so that it ends after the quarantine.
  struct LetGo {
    Lease& lease;
    std::atomic<bool>& released;
    ~LetGo() {
      if (!released.exchange(true)) (void)lease.unlock();
    }
  } let_go{*lease, released};
  const std::string channel = lock::release_channel("waited");
  auto listening = [&](std::size_t server) {
    auto r = set_->command(server, {"PUBSUB", "NUMSUB", channel});
    return r && r->elements == 2 && r->element[1]->integer == 1;
  };
  ASSERT_TRUE(test::eventually([&] { return listening(set_->master()); }, 30s))
      << "the waiter listens on the master";
  ASSERT_TRUE(set_->replicated(set_->master()));
  Client c = client_of(set_->url());
  const std::size_t promoted = fail_over("waited", c, *lease);
  ASSERT_EQ(promoted, 1u);
  EXPECT_TRUE(test::eventually([&] { return listening(promoted); }, 30s))
      << "the waiter listens on the new master" << after_the_failover();
  ASSERT_TRUE(
      test::eventually([&] { return lease->is_held() && on_server(promoted, "waited"); }, 30s))
      << "the holder kept its lock on the new master" << after_the_failover()
      << (lease->lost() ? ": it was told it lost it" : "");
  // The holder's client has moved too (its status is read from the new master): until then
  // its release would go to the dead one.
  std::string last;
  ASSERT_TRUE(test::eventually(
      [&] {
        auto status = a.status("waited");
        last = !status                  ? status.error().message()
               : status->nodes[0].error ? status->nodes[0].error->reason
                                        : (status->held ? "held" : "not held");
        return status && !status->nodes[0].error && status->held;
      },
      30s))
      << "the holder's status on the new master: " << last << after_the_failover();
  released = true;
  auto unlocked = lease->unlock();
  ASSERT_TRUE(unlocked) << unlocked.error().message();
  auto got = waiter.get();
  ASSERT_TRUE(got) << got.error().message() << after_the_failover();
}

// The replica guard: a grant counts only once WAIT confirmed the replicas; too few replicas,
// or one that does not answer, refuse the lock and leave nothing behind on the master.
TEST_F(SentinelNodeTest, TheReplicaGuardCountsAGrantOnlyOnceReplicasHaveIt) {
  // WAIT counts only a replica that is connected and synced: a fresh set's replica may still be
  // syncing (a clean-clone CI run with 16 tests at once refused the first lock that way).
  ASSERT_TRUE(set_->replicated(0));
  // WAIT returns once the replica confirms, so a generous bound costs nothing when all is well:
  // 400 ms of a 500 ms node timeout refused a lock with 16 tests at once in a clean-clone CI run.
  Client a = test::client_of({set_->url()}, 3s);
  LockOptions guarded = fixed(10s);
  guarded.min_replicas = 1;
  guarded.replica_timeout = 2s;  // below the client's node timeout (3 s)
  for (int i = 0; i < 5; ++i) {
    const std::string name = "guarded-" + std::to_string(i);
    auto lease = a.try_lock(name, guarded);
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_TRUE(on_server(1, name)) << "the replica had the key when the lock was granted";
    ASSERT_TRUE(lease->unlock());
  }

  LockOptions two = guarded;
  two.min_replicas = 2;
  // WAIT for a second replica that does not exist always runs its whole timeout: 400 ms of a
  // 500 ms node timeout left the reply late on a busy machine (a dev run with other builds).
  two.replica_timeout = 100ms;
  auto r = a.try_lock("guarded", two);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::quorum_not_reached)) << r.error().message();
  EXPECT_NE(r.error().message().find("REPLICAS 1 of 2"), std::string::npos) << r.error().message();
  EXPECT_FALSE(on_server(0, "guarded")) << "a refused attempt cleans up";

  set_->server(1).pause();
  LockOptions short_wait = guarded;
  short_wait.replica_timeout = 200ms;  // well inside the node timeout: WAIT's own answer comes
  r = a.try_lock("guarded", short_wait);
  set_->server(1).resume();
  ASSERT_FALSE(r) << "a replica that does not answer confirms nothing";
  EXPECT_NE(r.error().message().find("REPLICAS 0 of 1"), std::string::npos) << r.error().message();
  EXPECT_FALSE(on_server(0, "guarded"));

  LockOptions too_slow = guarded;
  too_slow.replica_timeout = 3s;  // the client's node timeout
  r = a.try_lock("guarded", too_slow);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::invalid_argument)) << r.error().message();
}

TEST_F(SentinelNodeTest, ABadNameOrNodeSaysWhatIsWrong) {
  const std::string url = set_->url();
  const std::string hosts = url.substr(0, url.rfind('/'));
  Client unknown = client_of(hosts + "/no-such-master");
  auto r = unknown.try_lock("job", fixed(5s));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("knows no master named 'no-such-master'"), std::string::npos)
      << r.error().message();

  const auto dead_port = std::to_string(sandbox::free_loopback_port());
  Client dead = client_of("redis-sentinel://127.0.0.1:" + dead_port + "/dlock");
  r = dead.try_lock("job", fixed(5s));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::quorum_not_reached) || r.error().is(errc::io_error))
      << r.error().message();
  EXPECT_NE(r.error().message().find("sentinel 127.0.0.1:" + dead_port), std::string::npos)
      << r.error().message();

  for (const char* bad : {"redis-sentinel://127.0.0.1:26379", "redis-sentinel://127.0.0.1:1/",
                          "redis-sentinel://,127.0.0.1:1/m", "redis-sentinel://h:99999/m"}) {
    ClientOptions options;
    options.nodes = {bad};
    auto c = Client::create(options);
    ASSERT_FALSE(c) << bad;
    EXPECT_TRUE(c.error().is(errc::invalid_argument)) << bad;
  }
}

// The sentinels' master named a second time by its own redis:// URL is one server: it votes
// once. Seen in an extension, which both names confirm (the same key): with the third node
// gone, one server alone must not make a quorum of two.
TEST_F(SentinelNodeTest, TheMasterNamedAlsoByItsAddressVotesOnce) {
  test::RedisServer other;
  ClientOptions options;
  options.nodes = {set_->url(), set_->server(0).url(), other.url()};
  options.node_timeout = 2s;  // as client_of: the sentinel node's first grant waits for WAIT
  auto c = Client::create(options);
  ASSERT_TRUE(c) << c.error().message();
  auto lease = c->try_lock("job", fixed(10s));  // the sentinel node and `other` grant
  ASSERT_TRUE(lease) << lease.error().message();
  other.kill9();
  auto extended = lease->extend(10s);
  ASSERT_FALSE(extended) << "one server confirmed the extension as two nodes";
  EXPECT_NE(extended.error().message().find("same server"), std::string::npos)
      << extended.error().message();
}

TEST(SentinelAuthTest, TheMastersPasswordIsUsedAndAWrongOneIsReported) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::SentinelSet set(1, "s3cret");
  Client good = client_of(set.url());
  auto lease = good.try_lock("job", fixed(5s));
  ASSERT_TRUE(lease) << lease.error().message();
  std::string wrong = set.url();
  wrong.replace(wrong.find("s3cret"), 6, "wrong");
  Client bad = client_of(wrong);
  auto r = bad.try_lock("job", fixed(5s));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("WRONGPASS"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace dlock

// SPDX-License-Identifier: MIT
// A Redis Cluster as a lock node (redis-cluster://), on real clusters made by redis-cli
// --cluster create: locks spread over the masters and exclude each other, fencing, waiting on
// shard channels, the watchdog on every shard, names with braces, a slot resharded while locks
// are held and waited for (MOVED, ASK), Redlock over three clusters, and clear errors.
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "lock/keys.h"
#include "node/node_keys.h"
#include "node/slots.h"
#include "support/lock_clients.h"
#include "support/redis_server.h"
#include "support/sharded_cluster.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;

using test::client_of;
using test::fixed;
using test::renewed;

class ClusterNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    cluster_ = std::make_unique<test::ShardedCluster>(3, 0);
  }
  Client make_client() { return client_of({cluster_->url()}); }
  std::unique_ptr<test::ShardedCluster> cluster_;
};

TEST_F(ClusterNodeTest, LocksSpreadOverEveryMasterAndExcludeOthers) {
  Client a = make_client();
  Client b = make_client();
  std::vector<Lease> leases;
  std::map<std::size_t, int> per_master;
  for (int i = 0; i < 48; ++i) {
    const std::string name = "job-" + std::to_string(i);
    auto lease = a.try_lock(name, fixed(30s));
    ASSERT_TRUE(lease) << name << ": " << lease.error().message();
    auto other = b.try_lock(name, fixed(30s));
    ASSERT_FALSE(other) << name;
    EXPECT_TRUE(other.error().is(errc::lock_held)) << other.error().message();
    EXPECT_TRUE(cluster_->exists(name)) << name;
    ++per_master[cluster_->master_of(name)];
    leases.push_back(std::move(*lease));
  }
  EXPECT_EQ(per_master.size(), 3u) << "every master serves some of the locks";
  for (auto& lease : leases) ASSERT_TRUE(lease.unlock());
  for (int i = 0; i < 48; ++i) EXPECT_FALSE(cluster_->exists("job-" + std::to_string(i)));
  // Nothing of a name stays: what is left (the fencing counters) expires within a ttl.
  for (std::size_t m : cluster_->masters()) {
    auto keys = cluster_->command(m, {"KEYS", "*job-*"});
    ASSERT_TRUE(keys);
    for (std::size_t k = 0; k < keys->elements; ++k) {
      const std::string key = keys->element[k]->str;
      EXPECT_EQ(key.rfind("dlock:fence:{", 0), 0u) << "left on master " << m << ": " << key;
      auto pttl = cluster_->command(m, {"PTTL", key});
      ASSERT_TRUE(pttl);
      EXPECT_GT(pttl->integer, 0) << key << " never expires";
      EXPECT_LE(pttl->integer, 30000) << key;
    }
  }
}

TEST_F(ClusterNodeTest, MutualExclusionAndGrowingTokensUnderContention) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 25;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::mutex mu;
  FencingToken last;
  int out_of_order = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      Client c = make_client();
      for (int i = 0; i < kRounds; ++i) {
        auto lease = c.lock("counter", 30s, renewed(5s));
        ASSERT_TRUE(lease) << lease.error().message();
        if (inside.fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard g(mu);
          if (!(lease->fencing_token() > last)) ++out_of_order;
          last = lease->fencing_token();
        }
        std::this_thread::sleep_for(1ms);
        inside.fetch_sub(1);
        ASSERT_TRUE(lease->unlock());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(out_of_order, 0);
}

// Every key of a name shares its slot: names with braces work like any other, for locks,
// read locks and semaphores (before, a script for "a{b}c" touched keys of two slots).
TEST_F(ClusterNodeTest, NamesWithBracesWork) {
  Client a = make_client();
  Client b = make_client();
  for (const char* name : {"a{b}c", "}x", "x{", "{}", "{user1}.q", "a}b{c"}) {
    auto lease = a.try_lock(name, fixed(30s));
    ASSERT_TRUE(lease) << name << ": " << lease.error().message();
    EXPECT_FALSE(b.try_lock(name, fixed(30s))) << name;
    EXPECT_FALSE(b.try_lock_shared(name, fixed(30s))) << name;
    ASSERT_TRUE(lease->unlock()) << name;
    auto r1 = a.try_lock_shared(name, fixed(30s));
    auto r2 = b.try_lock_shared(name, fixed(30s));
    ASSERT_TRUE(r1 && r2) << name;
    EXPECT_FALSE(b.try_lock(name, fixed(30s))) << name;
    ASSERT_TRUE(r1->unlock() && r2->unlock());
  }
  for (const char* name : {"pool{7}", "}pool"}) {
    Semaphore sem(a, name, 2, fixed(30s));
    auto p1 = sem.try_acquire_lease();
    auto p2 = sem.try_acquire_lease();
    ASSERT_TRUE(p1 && p2) << name;
    EXPECT_FALSE(sem.try_acquire_lease()) << name;
    ASSERT_TRUE(p1->unlock());
    EXPECT_TRUE(sem.try_acquire_lease()) << name;
  }
}

// The release wakes the waiter (a shard channel on the lock's master), long before the
// holder's ttl would have run out.
TEST_F(ClusterNodeTest, AWaiterWakesOnTheReleaseByShardedPubSub) {
  Client a = make_client();
  Client b = make_client();
  auto held = a.try_lock("job", fixed(30s));
  ASSERT_TRUE(held) << held.error().message();
  const auto start = std::chrono::steady_clock::now();
  auto waiter = std::async(std::launch::async, [&] { return b.lock("job", 25s, fixed(30s)); });
  const std::string channel = lock::release_channel("job");
  const std::size_t master = cluster_->master_of_slot(node::key_slot(channel));
  ASSERT_TRUE(test::eventually([&] {
    auto r = cluster_->command(master, {"PUBSUB", "SHARDNUMSUB", channel});
    return r && r->elements == 2 && r->element[1]->integer == 1;
  })) << "the waiter listens on the shard channel of the lock's master";
  ASSERT_TRUE(held->unlock());
  auto got = waiter.get();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s) << "woken by the release, not the ttl";
}

TEST_F(ClusterNodeTest, TheWatchdogRenewsLocksOnEveryShard) {
  Client a = make_client();
  Client b = make_client();
  std::vector<Lease> leases;
  for (int i = 0; i < 30; ++i) {
    auto lease = a.try_lock("renewed-" + std::to_string(i), renewed(1500ms));
    ASSERT_TRUE(lease) << lease.error().message();
    leases.push_back(std::move(*lease));
  }
  std::this_thread::sleep_for(4500ms);  // three ttls
  for (int i = 0; i < 30; ++i) {
    EXPECT_TRUE(leases[static_cast<std::size_t>(i)].is_held()) << i;
    EXPECT_FALSE(b.try_lock("renewed-" + std::to_string(i), fixed(5s))) << i;
  }
  for (auto& lease : leases) EXPECT_TRUE(lease.unlock());
}

TEST_F(ClusterNodeTest, StatusAndForceReleaseReachTheLocksMaster) {
  Client a = make_client();
  auto held = a.try_lock("stuck", fixed(60s));
  ASSERT_TRUE(held) << held.error().message();
  auto status = a.status("stuck");
  ASSERT_TRUE(status) << status.error().message();
  ASSERT_EQ(status->nodes.size(), 1u);
  EXPECT_FALSE(status->nodes[0].error) << status->nodes[0].error->reason;
  EXPECT_EQ(status->nodes[0].kind, KeyKind::dlock);
  EXPECT_TRUE(status->held);
  auto forced = a.force_release("stuck");
  ASSERT_TRUE(forced) << forced.error().message();
  EXPECT_FALSE(cluster_->exists("stuck"));
  EXPECT_TRUE(a.try_lock("stuck", fixed(5s)));
}

// A slot moves to another master while its lock is held and waited for: during the migration
// (ASK, TRYAGAIN) nobody else gets it, the holder's watchdog follows it (MOVED), the waiter
// listens where it went, and gets the lock when the holder releases.
TEST_F(ClusterNodeTest, ASlotReshardedWhileItsLockIsHeldAndWaitedFor) {
  Client a = make_client();
  Client b = make_client();
  Client c = make_client();
  const std::string name = "moving";
  const auto slot = node::key_slot(name);
  auto held = a.try_lock(name, renewed(1500ms));
  ASSERT_TRUE(held) << held.error().message();
  std::atomic<bool> released{false};
  auto waiter = std::async(std::launch::async, [&] {
    // A ttl of 5 s: the move quarantines the cluster for the largest live ttl (the slot may
    // have come without its keys), and the waiter gets the lock only after that.
    auto got = b.lock(name, 40s, fixed(5s));
    EXPECT_TRUE(released.load()) << "the waiter got the lock while the holder still had it";
    return got;
  });
  const std::size_t from = cluster_->master_of_slot(slot);
  std::size_t to = 0;
  while (to == from) ++to;

  cluster_->begin_migration(slot, to);
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(c.try_lock(name, fixed(5s))) << "during the migration, attempt " << i;
    std::this_thread::sleep_for(50ms);
  }
  cluster_->migrate_keys(slot, to);
  EXPECT_FALSE(c.try_lock(name, fixed(5s))) << "keys moved, slot not yet handed over";
  cluster_->finish_migration(slot, to);
  ASSERT_TRUE(cluster_->wait_until_stable());
  EXPECT_EQ(cluster_->master_of_slot(slot), to);

  std::this_thread::sleep_for(3s);  // two ttls: the watchdog renewed it on the new master
  EXPECT_TRUE(held->is_held());
  EXPECT_FALSE(c.try_lock(name, fixed(5s)));
  auto on_new_master = cluster_->command(to, {"EXISTS", name});
  ASSERT_TRUE(on_new_master);
  EXPECT_EQ(on_new_master->integer, 1);

  released = true;
  ASSERT_TRUE(held->unlock());
  auto got = waiter.get();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_TRUE(got->is_held());
}

// Issue 28 item 7: the permits of one semaphore are renewed in one script call (their keys
// share a slot). While their slot migrates with its keys split between the two masters, that
// call is answered TRYAGAIN for the whole migration; the renewal goes key by key then, each
// following its own ASK, so the holders keep their permits.
TEST_F(ClusterNodeTest, PermitsStayHeldWhileTheirSlotMigratesKeyByKey) {
  Client a = make_client();
  Client c = make_client();
  Semaphore pool(a, "pool", 3, renewed(1500ms));
  std::vector<Lease> permits;
  for (int i = 0; i < 3; ++i) {
    auto p = pool.try_acquire_lease();
    ASSERT_TRUE(p) << p.error().message();
    permits.push_back(std::move(*p));
  }
  const auto slot = node::key_slot(pool.slot_name(0));
  const std::size_t from = cluster_->master_of_slot(slot);
  std::size_t to = 0;
  while (to == from) ++to;

  cluster_->begin_migration(slot, to);
  cluster_->migrate_key(pool.slot_name(0), to);  // one permit here, two there
  std::this_thread::sleep_for(4500ms);           // three ttls of the watchdog renewing
  for (std::size_t i = 0; i < permits.size(); ++i) {
    EXPECT_TRUE(permits[i].is_held()) << "permit " << i << " lost during the migration";
  }
  Semaphore other(c, "pool", 3, fixed(5s));
  EXPECT_FALSE(other.try_acquire_lease()) << "a fourth permit during the migration";
  cluster_->migrate_keys(slot, to);
  cluster_->finish_migration(slot, to);
  ASSERT_TRUE(cluster_->wait_until_stable());
  std::this_thread::sleep_for(3s);  // two ttls on the new master
  for (std::size_t i = 0; i < permits.size(); ++i) {
    EXPECT_TRUE(permits[i].is_held()) << "permit " << i << " lost after the migration";
  }
  EXPECT_FALSE(other.try_acquire_lease()) << "a fourth permit after the migration";
  for (auto& p : permits) EXPECT_TRUE(p.unlock());
}

// The first grant of a ttl on slot 0's master waits for its replica to confirm the record
// (WAIT, within the node timeout): a generous node timeout, since a busy 2-core machine can keep
// a replica from answering within 500 ms. WAIT returns as soon as it confirms.
constexpr std::chrono::milliseconds kFailoverNodeTimeout{2000};

// A master with a replica each: the replica takes over when its master dies.
class ClusterFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    cluster_ = std::make_unique<test::ShardedCluster>(3, 1);
  }

  // Replica `replica` paused and its link to `master` cut (the master drops it at once): it
  // misses every write from now on, and may still be promoted with what it had.
  bool cut_off(std::size_t replica, std::size_t master) {
    cluster_->server(replica).pause();
    auto cut = cluster_->command(master, {"CLIENT", "KILL", "TYPE", "replica"});
    return cut && cut->integer == 1;
  }

  // Kills `master` (which serves `name`), lets `replica` run if it was paused, and waits until
  // the replica serves the slot; meanwhile `contender` never gets the lock while `lease` is
  // valid.
  void fail_over(const std::string& name, std::size_t master, std::size_t replica,
                 Client& contender, const Lease& lease) {
    const auto slot = node::key_slot(name);
    cluster_->server(master).kill9();
    cluster_->server(replica).resume();
    const auto limit = std::chrono::steady_clock::now() + 60s;
    while (cluster_->master_of_slot(slot) != replica) {
      ASSERT_LT(std::chrono::steady_clock::now(), limit) << "the replica never took over";
      if (lease.validity() > 0ms) {
        EXPECT_FALSE(contender.try_lock(name, fixed(5s))) << "a second holder during the failover";
      }
      std::this_thread::sleep_for(200ms);
    }
  }

  // `contender` never gets `name` while `lease` is valid, tried every 200 ms until it ends;
  // `why` is what a second holder would mean.
  static void expect_no_second_holder(const std::string& name, Client& contender,
                                      const Lease& lease, const std::string& why) {
    while (lease.validity() > 0ms) {
      auto other = contender.try_lock(name, fixed(1s));
      ASSERT_FALSE(other && lease.validity() > 0ms) << "two holders: " << why;
      std::this_thread::sleep_for(200ms);
    }
  }

  std::unique_ptr<test::ShardedCluster> cluster_;
};

// The replica had the key: the holder keeps its lock across the failover (its renewals count
// on the promoted replica even while the cluster is quarantined), and nobody else gets it.
TEST_F(ClusterFailoverTest, TheHolderKeepsALockTheReplicaHad) {
  Client a = client_of({cluster_->url()}, kFailoverNodeTimeout);
  Client b = client_of({cluster_->url()}, kFailoverNodeTimeout);
  const std::string name = "kept";
  auto why_lost = std::make_shared<std::string>();
  LockOptions options = renewed(15s);
  options.on_lost = [why_lost](const Error& e) { *why_lost = e.message(); };
  auto lease = a.try_lock(name, options);
  ASSERT_TRUE(lease) << lease.error().message();
  const std::size_t master = cluster_->master_of(name);
  const std::size_t replica = cluster_->replica_of(master);
  ASSERT_NE(replica, test::ShardedCluster::npos);
  ASSERT_TRUE(cluster_->replicated(master)) << "the key reached the replica";
  fail_over(name, master, replica, b, *lease);
  // Past the failover and more than one ttl: every renewal since went to the new master.
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(lease->is_held()) << "the holder lost a lock whose key survived: " << *why_lost;
    EXPECT_FALSE(b.try_lock(name, fixed(5s)));
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_TRUE(cluster_->exists(name));
  EXPECT_TRUE(lease->unlock());
}

// The promoted replica lacks the key (its master died before the write reached it): the holder
// is told it lost the lock, and nobody else gets the lock before the holder's validity is
// over. Without the failover counted as a restart, another client took it at once from the
// new master.
TEST_F(ClusterFailoverTest, ALockTheReplicaLostIsNeverHeldTwice) {
  Client a = client_of({cluster_->url()}, kFailoverNodeTimeout);
  Client b = client_of({cluster_->url()}, kFailoverNodeTimeout);
  const std::string name = "lost-on-failover";
  // Greeted first, and the greeting's boot records replicated everywhere: the replica lacks
  // only the lock's key (docs/safety.md: a lone node's failover moments after its very first
  // greeting is not protected).
  ASSERT_TRUE(a.try_lock("warm-up", fixed(1s)));
  for (std::size_t m : cluster_->masters()) ASSERT_TRUE(cluster_->replicated(m));
  const std::size_t master = cluster_->master_of(name);
  const std::size_t replica = cluster_->replica_of(master);
  ASSERT_NE(replica, test::ShardedCluster::npos);
  // The write that replication loses: the replica is stopped and cut off before it, and its
  // master dies before the replica can ask for it again.
  ASSERT_TRUE(cut_off(replica, master));
  auto lease = a.try_lock(name, renewed(15s));
  ASSERT_TRUE(lease) << lease.error().message();
  fail_over(name, master, replica, b, *lease);
  EXPECT_FALSE(cluster_->exists(name)) << "the promoted replica never had the key";

  // Until the holder's validity is over (it learns of the loss at its next renewal), no one
  // else holds the lock.
  const auto limit = std::chrono::steady_clock::now() + 60s;
  while (lease->validity() > 0ms && !lease->lost()) {
    ASSERT_LT(std::chrono::steady_clock::now(), limit);
    auto other = b.try_lock(name, fixed(5s));
    ASSERT_FALSE(other) << "two holders: the second got the lock from the promoted replica";
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(test::eventually([&] { return lease->lost(); }, 30s)) << "the holder is told";
  // Once the quarantine is over, the lock is free again.
  EXPECT_TRUE(
      test::eventually([&] { return static_cast<bool>(b.try_lock(name, fixed(5s))); }, 60s));
}

// As above, but the holder of the 20 s lease (not renewed) was then refused a larger ttl (40 s,
// on a name another library holds) and took its announcements back: the lease's ttl must still
// be known where the greeting reads it after the failover (slot 0's record, on a master that did
// not fail), so nobody gets the lock from the promoted replica while the lease is valid.
// Before: slot 0 knew the 20 s only under the holder's announcement, which the retraction
// removed; the quarantine lasted the contender's own ttl, and it got the lock beside the holder.
TEST_F(ClusterFailoverTest, ALeaseWhoseHolderWasRefusedALargerTtlIsNeverHeldTwice) {
  Client a = client_of({cluster_->url()}, kFailoverNodeTimeout);
  Client b = client_of({cluster_->url()}, kFailoverNodeTimeout);
  // Outside the master of slot 0: its record survives the failover.
  const std::size_t home = cluster_->master_of_slot(0);
  std::string name = "lost-after-retraction";
  for (int i = 0; cluster_->master_of(name) == home; ++i) {
    name = "lost-after-retraction-" + std::to_string(i);
  }
  const std::string foreign = "held-by-another-library";
  ASSERT_TRUE(
      cluster_->command(cluster_->master_of(foreign), {"SET", foreign, "x", "PX", "300000"}));
  ASSERT_TRUE(a.try_lock("warm-up", fixed(1s)));
  for (std::size_t m : cluster_->masters()) ASSERT_TRUE(cluster_->replicated(m));
  const std::size_t master = cluster_->master_of(name);
  const std::size_t replica = cluster_->replica_of(master);
  ASSERT_NE(replica, test::ShardedCluster::npos);
  ASSERT_TRUE(cut_off(replica, master));
  auto lease = a.try_lock(name, fixed(20s));
  ASSERT_TRUE(lease) << lease.error().message();
  auto larger = a.try_lock(foreign, fixed(40s));
  ASSERT_FALSE(larger) << "another library's lock was granted";
  ASSERT_TRUE(larger.error().is(errc::lock_held)) << larger.error().message();

  fail_over(name, master, replica, b, *lease);
  EXPECT_FALSE(cluster_->exists(name)) << "the promoted replica never had the key";
  ASSERT_NO_FATAL_FAILURE(expect_no_second_holder(
      name, b, *lease, "the second got the lock from the promoted replica"));
  EXPECT_TRUE(
      test::eventually([&] { return static_cast<bool>(b.try_lock(name, fixed(1s))); }, 60s));
}

// As ALockTheReplicaLostIsNeverHeldTwice, but the lock's slot is served by slot 0's master and
// its ttl (20 s) is new to the cluster (larger than any recorded, or recorded more than two ttls
// ago), without the replica guard: a lossy failover of that master loses the key and every
// record of that ttl together. Before, the lock was granted, the promoted replica's quarantine
// lasted the contender's 1 s ttl, and the contender got the lock beside the holder (found in
// review). Now the record of a ttl new there must reach that master's replicas (WAIT) before the
// grant counts: with its replica cut off, the attempt is refused, says why, and leaves nothing
// behind. The promise either way: refused clearly, or granted and never held twice while valid.
TEST_F(ClusterFailoverTest, ALossyFailoverOfTheHomeMasterLosingANewTtl) {
  Client a = client_of({cluster_->url()}, kFailoverNodeTimeout);
  Client b = client_of({cluster_->url()}, kFailoverNodeTimeout);
  const std::size_t home = cluster_->master_of_slot(0);
  std::string name = "lost-at-home";
  for (int i = 0; cluster_->master_of(name) != home || node::key_slot(name) == 0; ++i) {
    name = "lost-at-home-" + std::to_string(i);
  }
  auto warm_a = a.try_lock("warm-up", fixed(1s));
  ASSERT_TRUE(warm_a) << warm_a.error().message();
  auto warm_b = b.try_lock("warm-up-b", fixed(1s));
  ASSERT_TRUE(warm_b) << warm_b.error().message();
  for (std::size_t m : cluster_->masters()) ASSERT_TRUE(cluster_->replicated(m));
  const std::size_t replica = cluster_->replica_of(home);
  ASSERT_NE(replica, test::ShardedCluster::npos);
  ASSERT_TRUE(cut_off(replica, home));
  auto lease = a.try_lock(name, fixed(20s));
  if (!lease) {
    const std::string why = lease.error().message();
    EXPECT_NE(why.find("replicas of slot 0's master confirmed the record of a new ttl"),
              std::string::npos)
        << why;
    EXPECT_FALSE(cluster_->exists(name)) << "the refused attempt left its key behind";
    cluster_->server(replica).resume();
    return;
  }
  const auto granted = std::chrono::steady_clock::now();
  fail_over(name, home, replica, b, *lease);
  const auto failed_over = std::chrono::steady_clock::now();
  EXPECT_FALSE(cluster_->exists(name)) << "the promoted replica never had the key";
  while (lease->validity() > 0ms) {
    auto other = b.try_lock(name, fixed(1s));
    ASSERT_FALSE(other && lease->validity() > 0ms)
        << "two holders: "
        << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 granted)
               .count()
        << " ms after the grant, "
        << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 failed_over)
               .count()
        << " ms after the failover; validity left " << lease->validity().count() << " ms";
    std::this_thread::sleep_for(200ms);
  }
}

// A 5 s lease on slot 0's master (confirmed while the replica listens), then the same owner
// takes it again for 30 s with the replica cut off: an extension round, whose record of the
// larger ttl counts there only once the replica confirmed it, as a grant's does (docs/safety.md,
// "A ttl new to the master that holds the lock"). It is refused, the 5 s lease stays as it was,
// and the lossy failover gives the lock to nobody else while it lives. Before, the extension
// round counted on the master alone, and a second owner got the lock with 20 s of it left.
TEST_F(ClusterFailoverTest, AReentrantLargerTtlOnTheHomeMasterWithItsReplicaCutOffIsRefused) {
  Client a = client_of({cluster_->url()}, kFailoverNodeTimeout);
  Client b = client_of({cluster_->url()}, kFailoverNodeTimeout);
  const std::size_t home = cluster_->master_of_slot(0);
  std::string name = "regrown";
  for (int i = 0; cluster_->master_of(name) != home || node::key_slot(name) == 0; ++i) {
    name = "regrown-" + std::to_string(i);
  }
  auto warm_b = b.try_lock("warm-up-b", fixed(1s));
  ASSERT_TRUE(warm_b) << warm_b.error().message();
  auto small = a.try_lock(name, fixed(5s, "owner-a"));
  ASSERT_TRUE(small) << small.error().message();
  for (std::size_t m : cluster_->masters()) ASSERT_TRUE(cluster_->replicated(m));
  const std::size_t replica = cluster_->replica_of(home);
  ASSERT_NE(replica, test::ShardedCluster::npos);
  ASSERT_TRUE(cut_off(replica, home));
  auto lease = a.try_lock(name, fixed(30s, "owner-a"));
  ASSERT_FALSE(lease) << "reentrant 30 s with the replica cut off; validity "
                      << lease->validity().count() << " ms";
  EXPECT_NE(lease.error().message().find("REPLICAS"), std::string::npos) << lease.error().message();
  EXPECT_TRUE(small->is_held()) << "a refused reentrant acquisition lost the lease it joined";
  fail_over(name, home, replica, b, *small);
  while (small->validity() > 0ms) {
    auto other = b.try_lock(name, fixed(1s));
    ASSERT_FALSE(other && small->validity() > 0ms)
        << "two holders after a refused reentrant 30 s on slot 0's master; validity left "
        << small->validity().count() << " ms";
    std::this_thread::sleep_for(200ms);
  }
}

// Calls of `command` (INFO commandstats) that server `i` ran so far.
long long calls_of(test::ShardedCluster& cluster, std::size_t i, const std::string& command) {
  auto stats = cluster.command(i, {"INFO", "commandstats"});
  if (!stats || stats->type != REDIS_REPLY_STRING) return -1;
  const std::string text = stats->str;
  const auto at = text.find("cmdstat_" + command + ":calls=");
  if (at == std::string::npos) return 0;
  return std::stoll(text.substr(at + command.size() + 15));
}

// The cheap side of the test above: a ttl whose record its replica confirmed is not new. A 20 s
// lease on slot 0's master, granted while the replica listens, waits for it once; the next
// lease of that ttl there, granted once the replica is cut off, waits for nothing (no WAIT) and
// is still never held twice after a lossy failover: the promoted replica has the record, so its
// quarantine outlasts the lease whose key it lost.
TEST_F(ClusterFailoverTest, ATtlItsReplicaConfirmedIsNotWaitedForAgainAndStillProtects) {
  Client a = client_of({cluster_->url()}, kFailoverNodeTimeout);
  Client b = client_of({cluster_->url()}, kFailoverNodeTimeout);
  const std::size_t home = cluster_->master_of_slot(0);
  std::vector<std::string> names;
  for (int i = 0; names.size() < 2; ++i) {
    const std::string name = "home-" + std::to_string(i);
    if (cluster_->master_of(name) == home && node::key_slot(name) != 0) names.push_back(name);
  }
  auto warm_b = b.try_lock("warm-up-b", fixed(1s));
  ASSERT_TRUE(warm_b) << warm_b.error().message();
  const long long waits_before = calls_of(*cluster_, home, "wait");
  auto first = a.try_lock(names[0], fixed(20s));
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_GT(calls_of(*cluster_, home, "wait"), waits_before) << "a new ttl was not confirmed";
  ASSERT_TRUE(first->unlock());
  for (std::size_t m : cluster_->masters()) ASSERT_TRUE(cluster_->replicated(m));

  const std::size_t replica = cluster_->replica_of(home);
  ASSERT_NE(replica, test::ShardedCluster::npos);
  ASSERT_TRUE(cut_off(replica, home));
  const long long waits = calls_of(*cluster_, home, "wait");
  auto lease = a.try_lock(names[1], fixed(20s));
  ASSERT_TRUE(lease) << "a ttl the replica has was waited for again: " << lease.error().message();
  EXPECT_EQ(calls_of(*cluster_, home, "wait"), waits);
  fail_over(names[1], home, replica, b, *lease);
  EXPECT_FALSE(cluster_->exists(names[1])) << "the promoted replica never had the key";
  expect_no_second_holder(names[1], b, *lease,
                          "the promoted replica's quarantine ended before the lease it lost");
}

// A cluster that grants a lock knows its ttl where its greeting reads the largest ttl (slot
// 0's record), whatever slot the lock is in: a node that restarts later is then quarantined for
// at least that ttl even if the greeting that announced it missed the cluster. Here the
// greeting cannot write on slot 0's master while the lock's own master answers: before, the
// cluster granted the lock and its greeting record never learned the ttl.
TEST_F(ClusterNodeTest, AClusterThatGrantsALockKnowsItsTtlWhereGreetingsLook) {
  test::RedisServer s1;
  test::RedisServer s2;
  const std::size_t home = cluster_->master_of_slot(0);
  std::string name = "far";
  for (int i = 0; cluster_->master_of(name) == home; ++i) name = "far-" + std::to_string(i);
  Client c = client_of({s1.url(), s2.url(), cluster_->url()}, 300ms);
  ASSERT_TRUE(c.try_lock("warm-up", fixed(1s)));  // connected: the slot map is known
  // Slot 0's master refuses writes (out of memory), so the greeting's record cannot learn the
  // ttl there; the lock's own master answers as usual.
  ASSERT_TRUE(cluster_->command(home, {"CONFIG", "SET", "maxmemory", "1"}));
  auto lease = c.try_lock(name, fixed(45s));  // granted by s1 and s2
  ASSERT_TRUE(cluster_->command(home, {"CONFIG", "SET", "maxmemory", "0"}));
  ASSERT_TRUE(lease) << lease.error().message();
  if (cluster_->exists(name)) {
    // dlock:max-ttl is a zset ttl -> until: the largest ttl is its largest member.
    auto record =
        cluster_->command(home, {"ZRANGE", node::node_key_in_slot(lock::kMaxTtlKey, 0), "0", "-1"});
    ASSERT_TRUE(record && record->type == REDIS_REPLY_ARRAY && record->elements > 0)
        << "the cluster granted a ttl that its greeting record does not know";
    long long largest = 0;
    for (std::size_t i = 0; i < record->elements; ++i) {
      largest = std::max(largest, std::stoll(record->element[i]->str));
    }
    EXPECT_GE(largest, 45000);
  }
}

TEST_F(ClusterNodeTest, ABadNodeSaysWhatIsWrong) {
  test::RedisServer standalone;
  Client plain = client_of({"redis-cluster://127.0.0.1:" + std::to_string(standalone.port())});
  auto r = plain.try_lock("job", fixed(5s));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("cluster support disabled"), std::string::npos)
      << r.error().message();

  ClientOptions with_db;
  with_db.nodes = {cluster_->url() + "/2"};
  auto db = Client::create(with_db);
  ASSERT_FALSE(db);
  EXPECT_TRUE(db.error().is(errc::invalid_argument));
}

TEST(ClusterAuthTest, APasswordIsUsedOnEveryMasterAndAWrongOneIsReported) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::ShardedCluster cluster(3, 0, "s3cret");
  const std::string port = cluster.url().substr(cluster.url().rfind(':') + 1);
  Client good = client_of({"redis-cluster://:s3cret@127.0.0.1:" + port});
  for (int i = 0; i < 12; ++i) {
    auto lease = good.try_lock("job-" + std::to_string(i), fixed(5s));
    ASSERT_TRUE(lease) << lease.error().message();
  }
  Client bad = client_of({"redis-cluster://:wrong@127.0.0.1:" + port});
  auto r = bad.try_lock("job", fixed(5s));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("WRONGPASS"), std::string::npos) << r.error().message();
}

// Redlock over three clusters: each cluster is one vote; with one cluster down the other two
// are a quorum, and exclusion holds throughout.
TEST(ClusterRedlockTest, ThreeClustersAsThreeRedlockNodes) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  std::vector<std::unique_ptr<test::ShardedCluster>> clusters;
  std::vector<std::string> urls;
  for (int i = 0; i < 3; ++i) {
    clusters.push_back(std::make_unique<test::ShardedCluster>(3, 0));
    urls.push_back(clusters.back()->url());
  }
  Client a = client_of(urls);
  Client b = client_of(urls);
  ASSERT_EQ(a.node_count(), 3u);
  FencingToken last;
  for (int i = 0; i < 10; ++i) {
    auto lease = (i % 2 == 0 ? a : b).try_lock("job", fixed(10s));
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_GT(lease->fencing_token(), last);
    last = lease->fencing_token();
    EXPECT_FALSE((i % 2 == 0 ? b : a).try_lock("job", fixed(10s)));
    for (auto& c : clusters) EXPECT_TRUE(c->exists("job"));
    ASSERT_TRUE(lease->unlock());
  }
  // One cluster gone entirely: two of three still make a quorum.
  for (std::size_t i = 0; i < clusters[2]->size(); ++i) clusters[2]->server(i).kill9();
  auto lease = a.try_lock("job", fixed(10s));
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_GT(lease->fencing_token(), last);
  EXPECT_FALSE(b.try_lock("job", fixed(10s)));
}

}  // namespace
}  // namespace dlock

// SPDX-License-Identifier: MIT
// Issue 12, second review: three more paths to two holders, found by an adversarial review of
// the first fix. Each test failed on 042ae6f.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "lock/holds.h"
#include "lock/lease_state.h"
#include "lock/quorum_lock.h"
#include "lock/watchdog.h"
#include "net/node_address.h"
#include "node/node_set.h"
#include "scripts/script.h"
#include "support/cluster_fixture.h"
#include "support/redis_server.h"

namespace dlock {
namespace {
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A watchdog renewal that returns after a lease's validity ended is not applied: the hold may
// have been taken over by a newer acquisition of the same owner meanwhile.
// Passes everything to the real NodeSet; after the first renew round returns (before
// QuorumLock judges it), waits for the test's go-ahead (a few microseconds). The round is done
// on the watchdog's thread (the connections are idle), so only that thread waits.
class HookedFanout : public node::Fanout {
 public:
  explicit HookedFanout(node::NodeSet& inner) : inner_(inner) {}
  void start(std::vector<node::Call> calls, node::Enough enough, Done done) override {
    const bool hook = calls[0].script == &scripts::renew() && armed_.exchange(false);
    inner_.start(std::move(calls), std::move(enough),
                 [this, hook, done = std::move(done)](std::vector<node::Outcomes> out) {
                   if (hook) {
                     std::unique_lock lock(mu_);
                     renewed_at_ = Clock::now();
                     renewed_ = true;
                     cv_.notify_all();
                     cv_.wait(lock, [&] { return go_; });
                   }
                   done(std::move(out));
                 });
  }
  void post(std::function<void()> f) override { inner_.post(std::move(f)); }
  std::size_t size() const noexcept override { return inner_.size(); }
  const net::NodeAddress& address(std::size_t i) const override { return inner_.address(i); }
  std::uint64_t epoch(std::size_t i) const override { return inner_.epoch(i); }

  void arm() { armed_ = true; }
  Clock::time_point wait_renewed() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return renewed_; });
    return renewed_at_;
  }
  void go() {
    std::lock_guard lock(mu_);
    go_ = true;
    cv_.notify_all();
  }

 private:
  node::NodeSet& inner_;
  std::atomic<bool> armed_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool renewed_ = false, go_ = false;
  Clock::time_point renewed_at_;
};

std::shared_ptr<detail::LeaseState> lease_state(std::chrono::milliseconds ttl) {
  auto s = std::make_shared<detail::LeaseState>();
  s->ttl = ttl;
  s->auto_renew = true;
  s->renew_every = 200ms;
  return s;
}

TEST(Issue12ReviewTest, WatchdogRenewalReturningAfterValidityEndedDoesNotReviveTheLease) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster servers(3);
  std::vector<net::NodeAddress> addrs;
  for (const auto& u : servers.urls()) addrs.push_back(*net::parse_node_url(u));
  node::NodeSet nodes(addrs, net::ConnectionOptions{}, 200ms);
  HookedFanout fanout(nodes);
  lock::QuorumLock ql(fanout, 0.01);
  lock::Holds holds(ql);
  lock::Watchdog watchdog(ql);

  node::NodeSet rival_nodes(addrs, net::ConnectionOptions{}, 200ms);
  lock::QuorumLock rival(rival_nodes, 0.01);

  const OwnerToken owner("app-thread");
  // X: another lease of the client, tracked first (the watchdog applies results in order).
  auto x = lease_state(10s);
  ASSERT_FALSE(holds.acquire(x, "other", OwnerToken("x-owner"), 10s, std::nullopt));
  auto l1 = lease_state(3s);
  ASSERT_FALSE(holds.acquire(l1, "job", owner, 3s, std::nullopt));
  const auto t1 = l1->hold->fence;
  fanout.arm();
  const auto tracked = Clock::now();
  watchdog.track(x);
  watchdog.track(l1);
  // L1's renewals failed for a while (not simulated): its validity is nearly used up and ends
  // shortly after the next tick's renewal returns.
  const auto v = tracked + 200ms + 80ms;
  {
    std::lock_guard lock(l1->mu);
    l1->valid_until = v;
  }

  const auto renewed_at = fanout.wait_renewed();
  ASSERT_LT(renewed_at + 20ms, v) << "renewal returned too late for the repro";
  // Stands in for a user's Lease::extend() on X, which holds X's mutex across a round trip.
  std::unique_lock x_busy(x->mu);
  fanout.go();
  std::this_thread::sleep_until(v + 5ms);
  ASSERT_FALSE(l1->held_now()) << "L1's validity has ended";

  // The same owner locks "job" again (nested code, or another thread of an explicit owner):
  // not reentrant (no live lease), so a new hold takes the stale one over.
  auto l2 = lease_state(3s);
  ASSERT_FALSE(holds.acquire(l2, "job", owner, 3s, std::nullopt));
  EXPECT_NE(l2->hold.get(), l1->hold.get());
  x_busy.unlock();  // the watchdog goes on and applies L1's renewal

  // Give the watchdog time to apply L1's late renewal: it must not bring L1 back.
  EXPECT_FALSE(test::eventually([&] { return l1->held_now(); }, 1s))
      << "a renewal judged after L1's validity ended revived it";
  // The new hold ends: its release frees the key everywhere.
  {
    std::lock_guard lock(l2->mu);
    l2->status = detail::LeaseState::Status::released;
  }
  auto ended = holds.end(l2);
  ASSERT_TRUE(ended.last);
  ASSERT_TRUE(ended.released) << ended.released.error().message();

  auto r = rival.acquire(lock::HoldId{"job", OwnerToken("rival"), "rival.1"}, 3s);
  const bool rival_holds = std::holds_alternative<lock::Acquired>(r);
  const bool l1_holds = l1->held_now();
  std::chrono::milliseconds left{0};
  {
    std::lock_guard lock(l1->mu);
    left = std::chrono::duration_cast<std::chrono::milliseconds>(l1->valid_until - Clock::now());
  }
  EXPECT_FALSE(rival_holds && l1_holds)
      << "two holders of 'job': L1 (token " << t1.value() << ", validity left " << left.count()
      << " ms) and the rival (token "
      << (rival_holds ? std::get<lock::Acquired>(r).fence.value() : 0) << ")";
}

// An inner lease whose validity ended does not make its valid outer lease report lost.
class Issue12ReviewExtendTest : public test::ClusterTest {};

TEST_P(Issue12ReviewExtendTest, ExtendOfAnExpiredInnerLeaseKeepsTheValidOuterLease) {
  Client client = make_client();
  auto outer = client.try_lock("job", fixed(10s));
  ASSERT_TRUE(outer) << outer.error().message();
  auto inner = client.try_lock("job", fixed(300ms));
  ASSERT_TRUE(inner) << inner.error().message();
  std::this_thread::sleep_for(400ms);  // the inner lease's validity ends; the outer's does not
  auto r = inner->extend();
  EXPECT_FALSE(r);
  EXPECT_TRUE(outer->is_held()) << "outer lease (10 s, 9.5 s left) reports lost; lost()="
                                << outer->lost() << ", key on " << nodes_with("job") << " of "
                                << size() << " nodes";
}

INSTANTIATE_TEST_SUITE_P(Nodes, Issue12ReviewExtendTest, ::testing::Values(3),
                         test::node_count_name);

// The largest ttl ever granted is recorded by the acquisition itself, not only by greetings:
// a restarted node is quarantined for it although the greeting that announced it reached a bare
// quorum including the node that restarted.
class Issue12ReviewMaxTtlTest : public test::ClusterTest {
 protected:
  // As in issue_12_test.cc: ACL key patterns make one script fail on one node with an error
  // reply (NOPERM), as BUSY/OOM/LOADING would, while the connection stays up.
  void allow_keys(std::size_t i, const std::vector<std::string>& patterns) {
    std::vector<std::string> args{"ACL", "SETUSER", "default", "resetkeys"};
    for (const auto& p : patterns) args.push_back("~" + p);
    auto r = (*nodes_)[i].command(args);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
  }
};

// The review's case: X announces 20 s, C's greeting fails, and C grants X's lock with a ttl its
// greeting never recorded; A, which granted too, restarts; a greeting that C answers learned too
// short a ttl. acquire.lua records the ttl it grants, which closed it then. Since issue 28 a
// node that missed the last greeting does not vote at all until a greeting reaches it (a grant
// could otherwise run late, after another client read it: SimDirected.
// AGrantThatRunsAfterAGreetingLeavesItsTtlUnknown), so X's lock is refused outright.
TEST_P(Issue12ReviewMaxTtlTest, RestartedNodeIsQuarantinedForATtlItsGreetingMissed) {
  Client first = make_client();
  ASSERT_TRUE(first.try_lock("warm-up", fixed(500ms)));
  // X has greeted every node once (all members in its view), before its next greeting fails on C.
  Client x = make_client();
  ASSERT_TRUE(x.try_lock("warm-up-x", fixed(500ms)));
  // X announces 20 s: A (0) and B (1) record it, C (2) answers the greeting with an error; B
  // then answers X's acquisition with an error, so only A and C could grant it.
  allow_keys(1, {"dlock:boots", "dlock:max-ttl", "dlock:fence-floor"});
  allow_keys(2, {"job", "dlock:fence:*", "dlock:fence-floor", "dlock:max-ttl", "dlock:readers:*",
                 "dlock:writers-waiting:*"});
  auto held = x.try_lock("job", fixed(20s, "x"));
  allow_keys(1, {"*"});
  allow_keys(2, {"*"});
  ASSERT_FALSE(held) << "C voted for a ttl its greeting missed";
  EXPECT_NE(held.error().message().find("greeting"), std::string::npos) << held.error().message();
  EXPECT_FALSE((*nodes_)[0].exists("job")) << "the refused attempt left its key on A";
  // Once a greeting reaches C again, it votes.
  Result<Lease> later = Error(errc::lock_held, "");
  EXPECT_TRUE(test::eventually(
      [&] {
        later = x.try_lock("job", fixed(20s, "x"));
        return bool(later);
      },
      5s))
      << later.error().message();
}

INSTANTIATE_TEST_SUITE_P(Nodes, Issue12ReviewMaxTtlTest, ::testing::Values(3),
                         test::node_count_name);

}  // namespace
}  // namespace dlock

// SPDX-License-Identifier: MIT
// dlock::Semaphore on 1 and 3 real servers: never more holders than permits, a permit per slot
// with its own fencing token, a dead holder's permit back after its ttl, waiting woken by a
// release, cancellation and bad input leaving nothing behind.
#include <dlock/semaphore.h>

#include <array>
#include <atomic>
#include <future>
#include <stop_token>
#include <thread>

#include "core/access.h"
#include "lock/keys.h"
#include "support/cluster_fixture.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::eventually;

class SemaphoreTest : public test::ClusterTest {
 protected:
  // Slots of `s` present on a quorum of nodes.
  std::size_t slots_held(const Semaphore& s) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < s.max(); ++i) n += nodes_with(s.slot_name(i)) >= quorum() ? 1 : 0;
    return n;
  }
};

TEST_P(SemaphoreTest, NoMoreHoldersThanPermits) {
  Client a = make_client(), b = make_client();
  Semaphore sa(a, "pool", 3, renewed(10s)), sb(b, "pool", 3, renewed(10s));
  std::vector<Lease> permits;
  for (int i = 0; i < 3; ++i) {
    auto p = (i % 2 ? sb : sa).try_acquire_lease();
    ASSERT_TRUE(p) << p.error().message();
    permits.push_back(std::move(*p));
  }
  EXPECT_EQ(slots_held(sa), 3u);
  auto fourth = sb.try_acquire_lease();
  ASSERT_FALSE(fourth);
  EXPECT_TRUE(fourth.error().is(errc::lock_held)) << fourth.error().message();
  ASSERT_TRUE(permits[1].unlock());
  auto again = sb.try_acquire_lease();
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(again->name(), permits[1].name()) << "the freed slot, the only one free";
  permits.clear();
  again = Result<Lease>(Error(errc::cancelled, ""));  // released by the destructors
  EXPECT_TRUE(eventually([&] { return slots_held(sa) == 0; }, 5s));
}

TEST_P(SemaphoreTest, ThreadsNeverExceedThePermits) {
  constexpr int kThreads = 6;
  constexpr std::size_t kPermits = 2;
  Client c = make_client();
  Semaphore s(c, "pool", kPermits, renewed(5s));
  std::atomic<int> inside{0}, most{0}, over{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 8; ++i) {
          auto p = s.acquire_lease(30s);
          ASSERT_TRUE(p) << p.error().message();
          const int now = inside.fetch_add(1) + 1;
          if (now > static_cast<int>(kPermits)) ++over;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::sleep_for(5ms);
          inside.fetch_sub(1);
          ASSERT_TRUE(p->unlock());
        }
      });
    }
  }
  EXPECT_EQ(over.load(), 0);
  EXPECT_LE(most.load(), static_cast<int>(kPermits));
  EXPECT_EQ(slots_held(s), 0u);
}

TEST_P(SemaphoreTest, EachPermitHasItsSlotsGrowingToken) {
  Client c = make_client();
  Semaphore s(c, "pool", 1, fixed(10s));
  auto first = s.try_acquire_lease();
  ASSERT_TRUE(first);
  const auto t1 = first->fencing_token();
  ASSERT_TRUE(first->unlock());
  auto second = s.try_acquire_lease();
  ASSERT_TRUE(second);
  EXPECT_GT(second->fencing_token(), t1);
  EXPECT_EQ(second->name(), s.slot_name(0));
}

// The same thread taking two permits gets two slots, not a reentrant second lease of one.
TEST_P(SemaphoreTest, NotReentrant) {
  Client c = make_client();
  Semaphore s(c, "pool", 2, renewed(10s));
  ASSERT_TRUE(s.try_acquire());
  ASSERT_TRUE(s.try_acquire());
  EXPECT_EQ(s.held(), 2u);
  EXPECT_EQ(slots_held(s), 2u);
  auto full = s.try_acquire();
  ASSERT_FALSE(full);
  EXPECT_TRUE(full.error().is(errc::lock_held)) << full.error().message();
  ASSERT_TRUE(s.release());
  EXPECT_EQ(s.held(), 1u);
  EXPECT_TRUE(eventually([&] { return slots_held(s) == 1; }, 5s));
  ASSERT_TRUE(s.release());
  auto none = s.release();  // nothing held: nothing to give back
  ASSERT_FALSE(none);
  EXPECT_TRUE(none.error().is(errc::not_owner)) << none.error().message();
  EXPECT_EQ(s.held(), 0u);
}

TEST_P(SemaphoreTest, ADeadHoldersPermitComesBackAfterItsTtl) {
  Client dead = make_client(), live = make_client();
  Semaphore gone(dead, "pool", 1, fixed(800ms));
  auto permit = gone.try_acquire_lease();
  ASSERT_TRUE(permit);
  // The holder "dies": its lease is let go of without a release (no renewal either).
  ASSERT_TRUE(detail::detach(*permit));
  Semaphore s(live, "pool", 1, renewed(10s));
  const auto start = Clock::now();
  auto got = s.acquire_lease(20s);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_GE(Clock::now() - start, 300ms) << "the permit was still held";
  EXPECT_LT(Clock::now() - start, 10s);
}

TEST_P(SemaphoreTest, AReleaseWakesTheWaiterLongBeforeTheTtl) {
  Client a = make_client(), b = make_client();
  Semaphore sa(a, "pool", 2, renewed(20s)), sb(b, "pool", 2, renewed(20s));
  auto p1 = sa.try_acquire_lease();
  auto p2 = sa.try_acquire_lease();
  ASSERT_TRUE(p1 && p2);
  auto waiter = std::async(std::launch::async, [&] {
    auto p = sb.acquire_lease(60s);
    EXPECT_TRUE(p) << p.error().message();
    return Clock::now();
  });
  std::this_thread::sleep_for(400ms);
  const auto released = Clock::now();
  // Slot 1's: the waiter hears it although it is not the first slot's release.
  Lease& slot1 = p1->name() == sb.slot_name(1) ? *p1 : *p2;
  ASSERT_EQ(slot1.name(), sb.slot_name(1));
  ASSERT_TRUE(slot1.unlock());
  EXPECT_LT(waiter.get() - released, 5s) << "woken by the release, not by the 20 s ttl";
}

TEST_P(SemaphoreTest, TimeoutAndCancellationLeaveNothingBehind) {
  Client a = make_client(), b = make_client();
  Semaphore sa(a, "pool", 1, renewed(20s)), sb(b, "pool", 1, renewed(20s));
  auto held = sa.try_acquire_lease();
  ASSERT_TRUE(held) << held.error().message();
  const auto before = held->fencing_token();
  auto timed_out = sb.acquire_lease(500ms);
  ASSERT_FALSE(timed_out);
  EXPECT_TRUE(timed_out.error().is(errc::wait_timeout)) << timed_out.error().message();
  auto std_style = sb.try_acquire_for(300ms);
  ASSERT_FALSE(std_style);
  EXPECT_TRUE(std_style.error().is(errc::wait_timeout)) << std_style.error().message();

  std::stop_source stop;
  auto cancelled =
      std::async(std::launch::async, [&] { return sb.acquire_lease(60s, stop.get_token()); });
  std::this_thread::sleep_for(300ms);
  stop.request_stop();
  auto r = cancelled.get();
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::cancelled)) << r.error().message();
  // The holder still holds its slot, unchanged; nothing else was created.
  EXPECT_TRUE(held->is_held());
  auto status = a.status(sa.slot_name(0));
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->held);
  EXPECT_EQ(status->nodes[0].owners.size(), 1u);
  EXPECT_EQ(status->nodes[0].owners[0].owner, held->owner());
  EXPECT_EQ(held->fencing_token(), before);
  ASSERT_TRUE(held->unlock());
  EXPECT_TRUE(eventually([&] { return slots_held(sa) == 0; }, 5s));
}

TEST_P(SemaphoreTest, BadInputIsRefusedAndLeavesNothing) {
  Client c = make_client();
  for (auto [name, permits] : {std::pair{"", 2}, {"pool", 0}, {"pool", 5000}}) {
    Semaphore s(c, name, permits, renewed(10s));
    auto r = s.try_acquire_lease();
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().is(errc::invalid_argument)) << r.error().message();
    auto std_style = s.try_acquire();  // the same error, as a value: nothing throws
    ASSERT_FALSE(std_style);
    EXPECT_TRUE(std_style.error().is(errc::invalid_argument)) << std_style.error().message();
  }
  LockOptions owned = renewed(10s, "someone");
  LockOptions zero = renewed(10s);
  zero.ttl = 0ms;
  for (const LockOptions& o : {owned, zero}) {
    Semaphore s(c, "pool", 2, o);
    auto r = s.acquire_lease(1s);
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().is(errc::invalid_argument)) << r.error().message();
  }
  Semaphore s(c, "pool", 2, renewed(10s));
  EXPECT_EQ(slots_held(s), 0u);
}

// Fair mode: waiters queue once for the whole semaphore and get permits in arrival order,
// whichever slot is given back; one that gives up leaves the queue at once.
TEST_P(SemaphoreTest, FairWaitersGetPermitsInArrivalOrder) {
  LockOptions fair = renewed(10s);
  fair.fair = true;
  fair.fair_waiter_timeout = 60s;  // nobody is dropped as dead while the test runs
  Client holders = make_client();
  Semaphore held(holders, "pool", 2, fair);
  auto first = held.try_acquire_lease();
  auto second = held.try_acquire_lease();
  ASSERT_TRUE(first && second);
  const std::string queue = "dlock:queue:{pool}:dlock:sem:{pool}";
  auto queued = [&] { return (*nodes_)[0].command({"ZCARD", queue})->integer; };

  constexpr int kWaiters = 3;
  std::vector<Client> clients;
  std::vector<std::unique_ptr<Semaphore>> semaphores;
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(make_client());
    semaphores.push_back(std::make_unique<Semaphore>(clients.back(), "pool", 2, fair));
  }
  std::atomic<int> turn{0};
  std::array<std::atomic<int>, kWaiters> got{-1, -1, -1};
  std::vector<std::promise<void>> let_go(kWaiters);
  std::vector<std::future<void>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::async(std::launch::async, [&, i, go = let_go[i].get_future()] {
      auto permit = semaphores[i]->acquire_lease(60s);
      EXPECT_TRUE(permit) << permit.error().message();
      got[i] = turn++;
      go.wait();
    }));
    // One at a time, so the arrival order is i's order.
    ASSERT_TRUE(eventually([&] { return queued() == i + 1; }, 10s)) << "waiter " << i;
  }
  ASSERT_TRUE(second->unlock());
  ASSERT_TRUE(eventually([&] { return got[0] == 0; }, 10s)) << "the first in line got nothing";
  ASSERT_TRUE(first->unlock());  // the other slot
  ASSERT_TRUE(eventually([&] { return got[1] == 1; }, 10s)) << "the second in line got nothing";
  EXPECT_EQ(got[2], -1) << "the third jumped the line";
  let_go[0].set_value();  // waiter 0's permit goes back when its thread ends
  waiters[0].get();
  ASSERT_TRUE(eventually([&] { return got[2] == 2; }, 10s));
  let_go[1].set_value();
  let_go[2].set_value();
  waiters[1].get();
  waiters[2].get();
  EXPECT_TRUE(eventually([&] { return queued() == 0; }, 5s)) << "the queue was left behind";
  EXPECT_TRUE(eventually([&] { return slots_held(*semaphores[0]) == 0; }, 5s));
}

TEST_P(SemaphoreTest, AFairWaiterThatGivesUpLeavesTheQueue) {
  LockOptions fair = renewed(10s);
  fair.fair = true;
  fair.fair_waiter_timeout = 60s;
  Client holder = make_client(), waiter = make_client(), later = make_client();
  Semaphore held(holder, "pool", 1, fair);
  auto only = held.try_acquire_lease();
  ASSERT_TRUE(only);
  Semaphore s(waiter, "pool", 1, fair);
  auto r = s.acquire_lease(1s);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::wait_timeout)) << r.error().message();
  EXPECT_EQ(nodes_with("dlock:queue:{pool}:dlock:sem:{pool}"), 0u)
      << "a waiter that gave up still queues: it would hold the line for a minute";
  // The next waiter is first in line at once.
  auto next = std::async(std::launch::async,
                         [&] { return Semaphore(later, "pool", 1, fair).acquire_lease(30s); });
  std::this_thread::sleep_for(300ms);
  const auto released = Clock::now();
  ASSERT_TRUE(only->unlock());
  auto got = next.get();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_LT(Clock::now() - released, 10s);
}

TEST_P(SemaphoreTest, AcquireWaitsUntilAPermitIsGivenBack) {
  Client a = make_client(), b = make_client();
  Semaphore sa(a, "pool", 1, renewed(10s)), sb(b, "pool", 1, renewed(10s));
  ASSERT_TRUE(sa.try_acquire());
  auto giver = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(300ms);
    return sa.release();
  });
  const auto start = Clock::now();
  auto got = sb.acquire();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_GE(Clock::now() - start, 250ms);
  EXPECT_EQ(sb.held(), 1u);
  EXPECT_TRUE(giver.get());
  ASSERT_TRUE(sb.release());
}

TEST_P(SemaphoreTest, DestroyingTheSemaphoreGivesItsPermitsBack) {
  Client c = make_client();
  auto s = std::make_unique<Semaphore>(c, "pool", 2, renewed(10s));
  ASSERT_TRUE(s->try_acquire());
  ASSERT_TRUE(s->try_acquire());
  Semaphore probe(c, "pool", 2, renewed(10s));
  EXPECT_EQ(slots_held(probe), 2u);
  s.reset();
  EXPECT_TRUE(eventually([&] { return slots_held(probe) == 0; }, 5s));
}

TEST_P(SemaphoreTest, QuorumRulesAsForTheMutex) {
  if (size() < 3) GTEST_SKIP() << "needs 3 nodes";
  Client c = make_client();
  Semaphore s(c, "pool", 2, renewed(10s));
  ASSERT_TRUE(c.try_lock("warm-up", fixed(1s))->unlock());  // the set's first greeting: all up
  (*nodes_)[0].kill9();
  auto one_down = s.try_acquire_lease();
  ASSERT_TRUE(one_down) << one_down.error().message();
  (*nodes_)[1].kill9();
  auto no_quorum = s.try_acquire_lease();
  ASSERT_FALSE(no_quorum);
  EXPECT_TRUE(no_quorum.error().is(errc::quorum_not_reached)) << no_quorum.error().message();
}

// Issue 28 item 3: the permit count is the semaphore's, recorded on the nodes by the first
// acquisition, not whatever each client says: two holders of a 2-permit semaphore and a client
// that says 4 (or 1) is refused, naming both numbers. The record goes with the last permit.
TEST_P(SemaphoreTest, AnotherPermitCountIsRefusedWhilePermitsAreHeld) {
  Client a = make_client(), b = make_client();
  Semaphore two(a, "pool", 2, renewed(10s));
  auto p1 = two.try_acquire_lease();
  auto p2 = two.try_acquire_lease();
  ASSERT_TRUE(p1 && p2);
  Semaphore four(b, "pool", 4, renewed(10s));
  auto third = four.try_acquire_lease();
  ASSERT_FALSE(third) << "a third holder of a 2-permit semaphore: " << third->name();
  EXPECT_TRUE(third.error().is(errc::invalid_argument)) << third.error().message();
  EXPECT_NE(third.error().message().find("2 permits"), std::string::npos)
      << third.error().message();
  EXPECT_NE(third.error().message().find("not 4"), std::string::npos) << third.error().message();
  Semaphore one(b, "pool", 1, renewed(10s));
  auto fewer = one.acquire_lease(300ms);
  ASSERT_FALSE(fewer);
  EXPECT_TRUE(fewer.error().is(errc::invalid_argument)) << fewer.error().message();
  EXPECT_EQ(slots_held(four), 2u) << "a refused attempt leaves nothing behind";

  ASSERT_TRUE(p1->unlock());
  ASSERT_TRUE(p2->unlock());
  // Every permit is back: the record is gone with them, the next acquisition sets the count.
  Result<Lease> fresh(Error(errc::lock_held, ""));
  EXPECT_TRUE(eventually([&] { return (fresh = four.try_acquire_lease()).has_value(); }, 5s))
      << fresh.error().message();
  auto old = two.try_acquire_lease();
  ASSERT_FALSE(old);
  EXPECT_TRUE(old.error().is(errc::invalid_argument)) << old.error().message();
}

// Issue 28 item 3: changing the count is explicit. Growing is always allowed; shrinking only
// while no permit at the new count or above is held, and a refused shrink changes nothing.
TEST_P(SemaphoreTest, ResizeGrowsAlwaysAndShrinksOnlyWhenNoPermitAboveIsHeld) {
  Client c = make_client();
  EXPECT_TRUE(c.resize_semaphore("pool", 0).error().is(errc::invalid_argument));
  auto nothing = c.resize_semaphore("pool", 3);
  ASSERT_TRUE(nothing) << nothing.error().message();
  EXPECT_EQ(*nothing, 0u) << "no permit held: nothing recorded";
  Semaphore two(c, "pool", 2, renewed(10s));
  auto p0 = two.try_acquire_lease();
  auto p1 = two.try_acquire_lease();
  ASSERT_TRUE(p0 && p1);
  auto grown = c.resize_semaphore("pool", 3);
  ASSERT_TRUE(grown) << grown.error().message();
  EXPECT_EQ(*grown, 2u);
  Semaphore three(c, "pool", 3, renewed(10s));
  auto p2 = three.try_acquire_lease();
  ASSERT_TRUE(p2) << p2.error().message();
  EXPECT_EQ(p2->name(), three.slot_name(2));
  auto old = two.try_acquire_lease();
  ASSERT_FALSE(old);
  EXPECT_TRUE(old.error().is(errc::invalid_argument)) << old.error().message();

  auto shrink = c.resize_semaphore("pool", 2);
  ASSERT_FALSE(shrink) << "shrunk while permit 2 is held";
  EXPECT_TRUE(shrink.error().is(errc::lock_held)) << shrink.error().message();
  auto full = three.try_acquire_lease();
  ASSERT_FALSE(full);
  EXPECT_TRUE(full.error().is(errc::lock_held)) << "still 3 permits: " << full.error().message();

  ASSERT_TRUE(p2->unlock());
  Result<std::size_t> shrunk(Error(errc::lock_held, ""));
  EXPECT_TRUE(eventually([&] { return (shrunk = c.resize_semaphore("pool", 2)).has_value(); }, 5s))
      << shrunk.error().message();
  EXPECT_EQ(*shrunk, 3u);
  auto none = two.try_acquire_lease();
  ASSERT_FALSE(none);
  EXPECT_TRUE(none.error().is(errc::lock_held))
      << "2 permits, both held: " << none.error().message();
}

// Issue 28 item 3, fair mode: a fair waiter that names another count is refused before it
// queues, and leaves no place in line behind.
TEST_P(SemaphoreTest, AFairWaiterWithAnotherPermitCountIsRefusedAndDoesNotQueue) {
  Client a = make_client(), b = make_client();
  Semaphore two(a, "pool", 2, renewed(10s));
  auto p1 = two.try_acquire_lease();
  auto p2 = two.try_acquire_lease();
  ASSERT_TRUE(p1 && p2);
  LockOptions fair = renewed(10s);
  fair.fair = true;
  Semaphore four(b, "pool", 4, fair);
  auto refused = four.acquire_lease(2s);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(errc::invalid_argument)) << refused.error().message();
  EXPECT_EQ(nodes_with(lock::queue_key(four.slot_name(0))), 0u) << "left a place in line";
}

INSTANTIATE_TEST_SUITE_P(Nodes, SemaphoreTest, ::testing::Values(1, 3), test::node_count_name);

}  // namespace
}  // namespace dlock

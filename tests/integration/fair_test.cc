// SPDX-License-Identifier: MIT
// Fair mode on 1 and 5 nodes: arrival order, only the first in line woken, dead waiters
// dropped, and waiters that give up leave the queue.
#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "support/cluster_fixture.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::eventually;

class FairTest : public test::ClusterTest {
 protected:
  static LockOptions fair(std::chrono::milliseconds waiter_timeout = 30s) {
    LockOptions o = renewed(10s);
    o.fair = true;
    o.fair_waiter_timeout = waiter_timeout;
    return o;
  }
  long queued(std::size_t node = 0) {
    return (*nodes_)[node].command({"ZCARD", "dlock:queue:{job}"})->integer;
  }
  long evalsha_calls() {
    auto r = (*nodes_)[0].command({"INFO", "commandstats"});
    const std::string s = r->str;
    auto at = s.find("cmdstat_evalsha:calls=");
    return at == std::string::npos ? 0L : std::stol(s.substr(at + 22));
  }
};

TEST_P(FairTest, WaitersGetTheLockInArrivalOrder) {
  Client client = make_client();
  auto held = client.try_lock("job", fair());
  ASSERT_TRUE(held) << held.error().message();
  constexpr int kWaiters = 6;
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto lease = client.lock("job", 60s, fair());
      ASSERT_TRUE(lease) << lease.error().message();
      {
        std::lock_guard lock(mu);
        order.push_back(i);
      }
      std::this_thread::sleep_for(20ms);
      ASSERT_TRUE(lease->unlock());
    });
    // Arrive one after another: each is queued before the next starts.
    ASSERT_TRUE(eventually([&] { return queued() == i + 1; }));
  }
  ASSERT_TRUE(held->unlock());
  for (auto& t : threads) t.join();
  std::vector<int> expected(kWaiters);
  for (int i = 0; i < kWaiters; ++i) expected[i] = i;
  EXPECT_EQ(order, expected);
  EXPECT_EQ(queued(), 0);
}

TEST_P(FairTest, ReleaseWakesOnlyTheFirstInLine) {
  Client client = make_client();
  auto held = client.try_lock("job", fair());
  ASSERT_TRUE(held) << held.error().message();
  const long start = evalsha_calls();
  constexpr int kWaiters = 8;
  std::vector<std::future<bool>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(std::async(std::launch::async, [&] {
      auto lease = client.lock("job", 60s, fair());
      // Released by the thread that took it: a thread that ends while holding stops renewal.
      return lease.has_value() && lease->unlock().has_value();
    }));
  }
  ASSERT_TRUE(eventually([&] { return queued() == kWaiters; }));
  // Every waiter tries twice before it sleeps: once (which queues it), then again once it
  // listens for releases, so that a release in between is not missed. Count from after the
  // second tries, once no script has run for 500 ms (every waiter asleep: its next check-in is
  // seconds away). A fixed 200 ms after the queue was full was too short on a loaded machine
  // (ASan, ctest -j8 on 2 cores: late second tries counted as hand-offs, 31 > 24).
  long settled = evalsha_calls();
  ASSERT_TRUE(eventually(
      [&] {
        std::this_thread::sleep_for(500ms);
        const long now = evalsha_calls();
        const bool quiet = now == settled && now - start >= 2 * kWaiters;
        settled = now;
        return quiet;
      },
      30s))
      << settled - start << " scripts ran while " << kWaiters << " waiters went to sleep";
  const long before = settled;
  ASSERT_TRUE(held->unlock());
  for (auto& w : waiters) EXPECT_TRUE(w.get());
  const long calls = evalsha_calls() - before;
  // Each hand-off costs the release and the next waiter's attempt. Woken all at once, every
  // remaining waiter would try after each release: 8 + 7 + ... + 1 = 36 attempts.
  EXPECT_LE(calls, 3 * kWaiters) << calls << " scripts ran for " << kWaiters << " hand-offs";
}

TEST_P(FairTest, DeadWaiterIsDroppedAndTheQueueMovesOn) {
  Client client = make_client();
  auto held = client.try_lock("job", fair());
  ASSERT_TRUE(held) << held.error().message();
  // A waiter that queued first and then died: it will never check in again.
  for (std::size_t i = 0; i < size(); ++i) {
    (*nodes_)[i].command({"ZADD", "dlock:queue:{job}", "1", "ghost"});
    auto t = (*nodes_)[i].command({"TIME"});
    const long now_ms = std::stol(t->element[0]->str) * 1000 + std::stol(t->element[1]->str) / 1000;
    (*nodes_)[i].command(
        {"HSET", "dlock:queue-alive:{job}", "ghost", std::to_string(now_ms + 500)});
  }
  auto waiter = std::async(
      std::launch::async, [&] { return client.lock("job", 30s, fair(/*waiter_timeout=*/1500ms)); });
  ASSERT_TRUE(eventually([&] { return queued() == 2; }));
  ASSERT_TRUE(held->unlock());  // tells "ghost", who is gone
  auto lease = waiter.get();
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_EQ(queued(), 0);
}

TEST_P(FairTest, WaiterThatGivesUpLeavesTheQueue) {
  Client client = make_client();
  auto held = client.try_lock("job", fair());
  ASSERT_TRUE(held) << held.error().message();
  std::thread([&] {
    auto lease = client.lock("job", 400ms, fair());
    EXPECT_FALSE(lease);
    EXPECT_TRUE(lease.error().is(errc::wait_timeout)) << lease.error().message();
  }).join();
  for (std::size_t i = 0; i < size(); ++i) {
    EXPECT_EQ(queued(i), 0) << "node " << i;
  }
}

TEST_P(FairTest, TryLockDoesNotQueue) {
  Client client = make_client();
  auto held = client.try_lock("job", fair());
  ASSERT_TRUE(held) << held.error().message();
  std::thread([&] { EXPECT_FALSE(client.try_lock("job", fair())); }).join();
  EXPECT_EQ(queued(), 0);
}

INSTANTIATE_TEST_SUITE_P(Nodes, FairTest, ::testing::Values(1, 5), test::node_count_name);

}  // namespace
}  // namespace dlock

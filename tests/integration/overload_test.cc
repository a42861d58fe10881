// SPDX-License-Identifier: MIT
// Overload: 1,000 threads waiting on one name, and many thousands of distinct locks held under
// watchdog renewal. No stalls, bounded memory, and nothing left in Redis afterwards but the
// fencing counters.
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include "support/redis_server.h"

#ifndef DLOCK_OVERLOAD_LOCKS
#define DLOCK_OVERLOAD_LOCKS 100000
#endif
#ifndef DLOCK_OVERLOAD_BYTES_PER_LOCK
#define DLOCK_OVERLOAD_BYTES_PER_LOCK 4096
#endif
// Sanitizer runtimes keep freed memory in quarantine, so resident size says nothing there
// (LeakSanitizer checks for leaks instead).
#ifndef DLOCK_OVERLOAD_CHECK_GROWTH
#define DLOCK_OVERLOAD_CHECK_GROWTH 1
#endif

namespace dlock {
namespace {

using namespace std::chrono_literals;

long resident_kb() {
  std::ifstream in("/proc/self/status");
  std::string key;
  for (long value; in >> key;) {
    if (key == "VmRSS:" && in >> value) return value;
  }
  return 0;
}

class OverloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    server_ = std::make_unique<test::RedisServer>();
  }
  Client client() {
    ClientOptions o;
    o.nodes = {server_->url()};
    o.node_timeout = 2s;  // a node busy with a large batch is slow, not dead
    return std::move(Client::create(o)).value();
  }
  // Every key in the node, except the fencing counters (they expire a ttl after the last
  // acquisition) and dlock's per-node bookkeeping.
  std::vector<std::string> leftovers() {
    std::vector<std::string> keys;
    std::string cursor = "0";
    do {
      auto r = server_->command({"SCAN", cursor, "COUNT", "10000"});
      cursor = r->element[0]->str;
      for (size_t i = 0; i < r->element[1]->elements; ++i) {
        const std::string k = r->element[1]->element[i]->str;
        if (k.rfind("dlock:fence:", 0) != 0 && k != "dlock:boots" && k != "dlock:max-ttl" &&
            k != "dlock:fence-floor") {
          keys.push_back(k);
        }
      }
    } while (cursor != "0");
    return keys;
  }
  std::unique_ptr<test::RedisServer> server_;
};

TEST_F(OverloadTest, ThousandWaitersOnOneNameAllGetItInTurn) {
  Client c = client();
  constexpr int kWaiters = 1000;
  std::atomic<int> got{0};
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  auto holder = c.try_lock("hot", LockOptions{});
  ASSERT_TRUE(holder);
  std::vector<std::thread> threads;
  threads.reserve(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      auto lease = c.lock("hot", 300s);
      if (!lease) return;
      if (inside.fetch_add(1) != 0) ++overlaps;
      inside.fetch_sub(1);
      ++got;
      (void)lease->unlock();
    });
  }
  std::this_thread::sleep_for(1s);  // let them all queue up
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(holder->unlock());
  for (auto& t : threads) t.join();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(got.load(), kWaiters);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_LT(took, 200s) << "1,000 hand-offs must not stall";
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(OverloadTest, ManyLocksHeldUnderRenewalThenNothingLeft) {
  Client c = client();
  constexpr int kLocks = DLOCK_OVERLOAD_LOCKS;
  constexpr int kThreads = 8;
  const long rss_before = resident_kb();
  std::vector<std::vector<Lease>> held(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Named owners: the leases outlive these threads (a thread-bound owner would stop
      // being renewed when its thread ends).
      LockOptions o;
      o.ttl = 9s;  // renewed every 3 s; a slow round on a busy machine still fits
      o.owner = OwnerToken("overload-" + std::to_string(t));
      for (int i = t; i < kLocks; i += kThreads) {
        auto lease = c.try_lock("load:" + std::to_string(i), o);
        if (!lease) {
          ++failures;
          continue;
        }
        held[static_cast<std::size_t>(t)].push_back(std::move(*lease));
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);
  const long rss_held = resident_kb();
  EXPECT_LT((rss_held - rss_before) * 1024 / kLocks, DLOCK_OVERLOAD_BYTES_PER_LOCK)
      << "bytes per held lock";
  // Renewal keeps up (every lock still held after several periods of 3 s), and renewing does
  // not make the client grow, not even for the length of a round: RSS sampled through about
  // four rounds of 100,000 renewals stays within a small margin. (A tick that built every
  // lease's request at once grew by 25 MB for each round; on a busy machine glibc kept it.)
  long rss_low = rss_held;
  long rss_high = rss_held;
  for (auto until = std::chrono::steady_clock::now() + 11s;
       std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(100ms);
    const long now = resident_kb();
    rss_low = std::min(rss_low, now);
    rss_high = std::max(rss_high, now);
  }
  std::printf("rss KiB: before %ld, %d held %ld, while renewing %ld..%ld\n", rss_before, kLocks,
              rss_held, rss_low, rss_high);
  if (DLOCK_OVERLOAD_CHECK_GROWTH) {
    EXPECT_LT(rss_high - rss_low, (rss_held - rss_before) / 20 + 8 * 1024)
        << "KiB RSS varied by while renewing";
  }
  std::size_t alive = 0;
  for (auto& v : held) {
    for (auto& l : v) alive += l.is_held() ? 1 : 0;
  }
  EXPECT_EQ(alive, static_cast<std::size_t>(kLocks));
  auto dbsize = server_->command({"DBSIZE"});
  EXPECT_GE(dbsize->integer, kLocks);
  held.clear();  // every Lease releases as it goes
  EXPECT_TRUE(leftovers().empty()) << leftovers().size() << " keys left, e.g. " << leftovers()[0];
}

}  // namespace
}  // namespace dlock

// SPDX-License-Identifier: MIT
// dlock::Mutex meets Lockable and TimedLockable, on 1 and 5 nodes.
#include <dlock/mutex.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "support/cluster_fixture.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;

class LockableTest : public test::ClusterTest {};

TEST_P(LockableTest, ScopedLockHoldsAndReleases) {
  Mutex m(make_client(), "job");
  {
    std::scoped_lock guard(m);
    expect_held_everywhere("job");
    ASSERT_NE(m.lease(), nullptr);
    EXPECT_GT(m.lease()->fencing_token().value(), 0u);
  }
  expect_released_everywhere("job");
  EXPECT_EQ(m.lease(), nullptr);
}

TEST_P(LockableTest, GuardReleasesWhenAnExceptionLeavesTheScope) {
  Mutex m(make_client(), "job");
  try {
    std::unique_lock guard(m);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  expect_released_everywhere("job");
}

TEST_P(LockableTest, TryLockForAndUntilTimeOutWhileAnotherThreadHoldsIt) {
  Mutex m(make_client(), "job");
  std::unique_lock held(m);
  std::thread([&] {
    std::unique_lock mine(m, std::defer_lock);
    EXPECT_FALSE(mine.try_lock());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(mine.try_lock_for(300ms));
    EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
    EXPECT_FALSE(mine.try_lock_until(std::chrono::steady_clock::now() + 200ms));
  }).join();
  held.unlock();
  std::thread([&] {
    std::unique_lock mine(m, std::defer_lock);
    EXPECT_TRUE(mine.try_lock_for(2s));
  }).join();
  std::thread([&] {  // deadlines at the ends of the clock: one attempt, and a wait, no overflow
    std::unique_lock mine(m, std::defer_lock);
    EXPECT_TRUE(mine.try_lock_until(std::chrono::steady_clock::time_point::min()));
    mine.unlock();
    EXPECT_TRUE(mine.try_lock_until(std::chrono::steady_clock::time_point::max()));
  })
      .join();
}

TEST_P(LockableTest, SameThreadMayLockAgain) {
  Mutex m(make_client(), "job");
  std::unique_lock outer(m);
  std::unique_lock inner(m);
  inner.unlock();
  expect_held_everywhere("job");
  outer.unlock();
  expect_released_everywhere("job");
}

TEST_P(LockableTest, StdLockGuardKeepsACounterExactAcrossThreads) {
  Mutex m(make_client(), "counter");
  long counter = 0;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 15; ++i) {
        std::lock_guard guard(m);
        if (inside.fetch_add(1) != 0) ++overlaps;
        long seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 6 * 15);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST_P(LockableTest, InfrastructureErrorsThrowInsteadOfLookingLikeContention) {
  LockOptions o;
  o.retry_delay = 10ms;
  Mutex m(make_client(100ms), "job", o);
  kill_majority();
  try {
    (void)m.try_lock();
    ADD_FAILURE() << "try_lock without a quorum must throw";
  } catch (const Exception& e) {
    EXPECT_TRUE(e.error().is(errc::quorum_not_reached)) << e.what();
  }
  EXPECT_THROW((void)m.try_lock_for(200ms), Exception);
}

// unlock() cannot throw: a release that finds the lock gone goes to the handler given at
// construction, once, on the unlocking thread.
TEST_P(LockableTest, FailedUnlockIsReportedToTheConstructorsHandler) {
  std::vector<Error> errors;
  std::thread::id called_on;
  Mutex m(make_client(), "job", fixed(30s), [&](const Error& e) {
    errors.push_back(e);
    called_on = std::this_thread::get_id();
  });
  m.lock();
  for (std::size_t i = 0; i < size(); ++i) (*nodes_)[i].command({"DEL", "job"});
  m.unlock();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(errors[0].is(errc::lock_lost)) << errors[0].message();
  EXPECT_EQ(called_on, std::this_thread::get_id());
  // A release that works calls nothing.
  m.lock();
  m.unlock();
  EXPECT_EQ(errors.size(), 1u);
  expect_released_everywhere("job");
}

INSTANTIATE_TEST_SUITE_P(Nodes, LockableTest, ::testing::Values(1, 5), test::node_count_name);

}  // namespace
}  // namespace dlock

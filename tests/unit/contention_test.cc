// SPDX-License-Identifier: MIT
// The benchmark's contention analysis (bench/contention.h): hand-offs, waits, barging.
#include "contention.h"

#include <gtest/gtest.h>

namespace dlock::bench {
namespace {

// Times in microseconds, turned into nanoseconds.
Acquisition at(std::int64_t start, std::int64_t acquired, std::int64_t released) {
  return {start * 1000, acquired * 1000, released * 1000};
}

TEST(ContentionTest, HandOffIsFromReleaseToAWaitingWorker) {
  // Worker 0 holds 0..10; worker 1 waits from 1 and gets it at 12; worker 0 comes back at 11
  // and gets it at 25, after worker 1's release at 22.
  const auto s = analyze({{at(0, 0, 10), at(11, 25, 30)}, {at(1, 12, 22)}});
  EXPECT_EQ(s.acquisitions, 3u);
  EXPECT_EQ(s.handoff.n, 2u);
  EXPECT_DOUBLE_EQ(s.handoff.p50, 2.0);  // 10 -> 12
  EXPECT_DOUBLE_EQ(s.handoff.max, 3.0);  // 22 -> 25
  EXPECT_DOUBLE_EQ(s.wait.max, 14.0);    // 11 -> 25
  EXPECT_EQ(s.barging, 0.0);
  EXPECT_EQ(s.overlaps, 0u);
}

TEST(ContentionTest, ReleaserTakingItBackAheadOfAWaiterIsBarging) {
  // Worker 1 waits from 1 to 30; worker 0 releases at 10 and takes it again at 12.
  const auto s = analyze({{at(0, 0, 10), at(11, 12, 20)}, {at(1, 30, 35)}});
  // Both releases had worker 1 waiting: 10 -> 30 (barged in between) and 20 -> 30.
  EXPECT_EQ(s.handoff.n, 2u);
  EXPECT_DOUBLE_EQ(s.handoff.max, 20.0);
  EXPECT_NEAR(s.barging, 0.5, 1e-9);  // 1 of the 2 acquisitions after the first
}

TEST(ContentionTest, NoWaiterNoBarging) {
  const auto s = analyze({{at(0, 0, 10), at(11, 12, 20)}});
  EXPECT_EQ(s.barging, 0.0);
  EXPECT_EQ(s.handoff.n, 0u);
}

TEST(ContentionTest, OverlapIsCounted) {
  const auto s = analyze({{at(0, 0, 10)}, {at(1, 5, 12)}});
  EXPECT_EQ(s.overlaps, 1u);
}

TEST(SummaryTest, NearestRankPercentiles) {
  std::vector<std::int64_t> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i * 1000);
  const auto s = summarize(v);
  EXPECT_DOUBLE_EQ(s.p50, 50.0);
  EXPECT_DOUBLE_EQ(s.p99, 99.0);
  EXPECT_DOUBLE_EQ(s.max, 100.0);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_EQ(summarize({}).n, 0u);
}

}  // namespace
}  // namespace dlock::bench

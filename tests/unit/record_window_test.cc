// SPDX-License-Identifier: MIT
// RecordWindow (node/record_window.h): which acquisitions a server node sends without the
// script's check of the record of lease ttls, from the grants it saw.
#include "node/record_window.h"

#include <gtest/gtest.h>

#include <chrono>

#include "node/replica_confirm.h"

namespace dlock::node {
namespace {

using namespace std::chrono_literals;

TEST(RecordWindowTest, ReachIsOneAndAHalfTtlsLessDriftAndGranularity) {
  // 15,000 ms less 1% (150) and 2 ms.
  EXPECT_EQ(RecordWindow::reach(10000, 0.01), 14848ms);
  // An odd ttl rounds down, as acquire.lua's math.floor(ttl / 2); the drift rounds up.
  EXPECT_EQ(RecordWindow::reach(1001, 0.01), std::chrono::milliseconds(1501 - 16 - 2));
  // The lock's drift factor, whatever it is (a review found 1% fixed: with a drift factor of
  // 5%, a server clock that fast ended the record 182 ms before a lease's validity).
  EXPECT_EQ(RecordWindow::reach(60000, 0.05), std::chrono::milliseconds(90000 - 4500 - 2));
  EXPECT_EQ(RecordWindow::reach(10000, 0.0), 14998ms);
}

// With a server clock that runs as fast as the drift factor allows, the record ends (on this
// client's clock) no sooner than the window says: 1.5 ttl / (1 + drift) >= reach.
TEST(RecordWindowTest, TheReachEndsBeforeAFastServerClockEndsTheRecord) {
  for (const double drift : {0.0, 0.01, 0.05, 0.2, 0.5}) {
    for (const std::int64_t ttl : {1, 2, 3, 999, 1000, 30000, 604800000}) {
      const double record_ends = static_cast<double>(ttl + ttl / 2) / (1.0 + drift);
      EXPECT_LE(static_cast<double>(RecordWindow::reach(ttl, drift).count()), record_ends)
          << "ttl " << ttl << ", drift " << drift;
    }
  }
}

// The same for the records a Sentinel or cluster node confirms on the replicas (two ttls): the
// drift factor, not a fixed 1%.
TEST(RecordWindowTest, AConfirmedRecordEndsBeforeAFastServerClockEndsIt) {
  const auto sent = net::Clock::now();
  for (const double drift : {0.0, 0.01, 0.05, 0.2, 0.5}) {
    for (const std::int64_t ttl : {1, 2, 3, 999, 1000, 30000, 604800000}) {
      const double record_ends = static_cast<double>(2 * ttl) / (1.0 + drift);
      const auto lives = std::chrono::duration_cast<std::chrono::milliseconds>(
          record_lives_until(sent, ttl, drift) - sent);
      EXPECT_LE(static_cast<double>(lives.count()), record_ends)
          << "ttl " << ttl << ", drift " << drift;
    }
  }
  EXPECT_EQ(record_lives_until(sent, 10000, 0.01) - sent, 19798ms);  // as with 1% fixed
}

TEST(RecordWindowTest, NothingIsCoveredBeforeAGrant) {
  RecordWindow window;
  const auto now = net::Clock::now();
  EXPECT_FALSE(window.covers(1, 1, now));
  EXPECT_FALSE(window.covers(1, 0, now)) << "epoch 0 is a connection not ready";
}

// A lease of ttl T, answered by its deadline, ends inside the record when the deadline is at most
// half a ttl (less the margins) after the checking call was sent.
TEST(RecordWindowTest, ALeaseIsCoveredWhileItsDeadlinePlusTtlEndsInsideTheReach) {
  RecordWindow window;
  const auto sent = net::Clock::now();
  window.granted(10000, 0.01, 7, sent);
  EXPECT_TRUE(window.covers(10000, 7, sent + 200ms));
  EXPECT_TRUE(window.covers(10000, 7, sent + 4848ms));
  EXPECT_FALSE(window.covers(10000, 7, sent + 4849ms)) << "the lease would end past the record";
  // A smaller ttl ends sooner: covered longer. A larger one is not this entry's.
  EXPECT_TRUE(window.covers(5000, 7, sent + 9848ms));
  EXPECT_FALSE(window.covers(10001, 7, sent + 200ms)) << "a larger ttl than the record's";
  // Another connection may reach another server process, with another record.
  EXPECT_FALSE(window.covers(10000, 8, sent + 200ms)) << "a window crossed connections";
  EXPECT_FALSE(window.covers(10000, 0, sent + 200ms));
}

TEST(RecordWindowTest, ALaterGrantReplacesUnlessWhatWasKnownCoversMore) {
  RecordWindow window;
  const auto t0 = net::Clock::now();
  window.granted(60000, 0.01, 1, t0);
  // A smaller ttl, sent later, whose window ends before the larger one's: the larger is kept.
  window.granted(1000, 0.01, 1, t0 + 1s);
  EXPECT_TRUE(window.covers(60000, 1, t0 + 2s)) << "a dominated grant replaced a larger window";
  // The same ttl, later: the window moves on.
  window.granted(60000, 0.01, 1, t0 + 20s);
  EXPECT_TRUE(window.covers(60000, 1, t0 + 49s));
  // A smaller ttl whose window outlasts the larger one's replaces it: the larger ttl then checks.
  window.granted(1000, 0.01, 1, t0 + 150s);
  EXPECT_TRUE(window.covers(1000, 1, t0 + 150s + 200ms));
  EXPECT_FALSE(window.covers(60000, 1, t0 + 150s + 200ms));
  // A grant on a new connection replaces whatever the old one knew.
  window.granted(500, 0.01, 2, t0 + 151s);
  EXPECT_FALSE(window.covers(1000, 1, t0 + 150s + 300ms));
  EXPECT_TRUE(window.covers(500, 2, t0 + 151s + 10ms));
}

}  // namespace
}  // namespace dlock::node

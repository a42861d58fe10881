// SPDX-License-Identifier: MIT
#include "lock/validity.h"

#include <gtest/gtest.h>

namespace dlock::lock {
namespace {

using namespace std::chrono_literals;

TEST(QuorumTest, IsAMajority) {
  EXPECT_EQ(quorum(1), 1u);
  EXPECT_EQ(quorum(2), 2u);
  EXPECT_EQ(quorum(3), 2u);
  EXPECT_EQ(quorum(4), 3u);
  EXPECT_EQ(quorum(5), 3u);
  EXPECT_EQ(quorum(7), 4u);
}

TEST(DriftTest, IsOnePercentPlusTwoMillis) {
  EXPECT_EQ(drift(10000ms, 0.01), 102ms);
  EXPECT_EQ(drift(30000ms, 0.01), 302ms);
  EXPECT_EQ(drift(100ms, 0.0), 2ms);
}

TEST(DriftTest, RoundsUpSoValidityIsNeverOverstated) {
  EXPECT_EQ(drift(150ms, 0.01), 4ms);  // 1.5 ms -> 2 ms, + 2 ms
  EXPECT_EQ(drift(1ms, 0.01), 3ms);
}

TEST(ValidityTest, IsTtlMinusElapsedMinusDrift) {
  EXPECT_EQ(validity(10000ms, 100ms, 0.01), 9798ms);
  EXPECT_EQ(validity(1000ms, 0ms, 0.01), 988ms);
}

TEST(ValidityTest, RoundsElapsedUp) {
  EXPECT_EQ(validity(1000ms, std::chrono::microseconds(100100), 0.01), 887ms);
}

TEST(ValidityTest, NotPositiveWhenAcquisitionTookTheWholeTtl) {
  EXPECT_LE(validity(100ms, 98ms, 0.01).count(), 0);
  EXPECT_LT(validity(100ms, 150ms, 0.01).count(), 0);
}

}  // namespace
}  // namespace dlock::lock

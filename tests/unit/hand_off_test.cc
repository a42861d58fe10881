// SPDX-License-Identifier: MIT
#include "lock/hand_off.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace dlock::lock {
namespace {

using namespace std::chrono_literals;

TEST(HandOffTest, GraceIsEightRoundTripsWithinBounds) {
  EXPECT_EQ(HandOff::grace(10us), 3ms);
  EXPECT_EQ(HandOff::grace(1ms), 8ms);
  EXPECT_EQ(HandOff::grace(1s), 30ms);
}

TEST(HandOffTest, HoldsBackOnceForTheNameReleased) {
  HandOff h;
  EXPECT_FALSE(h.hold_back_until("a"));
  const auto before = HandOff::Clock::now();
  h.released("a", 1ms);
  const auto until = h.hold_back_until("a");
  ASSERT_TRUE(until);
  EXPECT_GE(*until, before + 8ms);
  EXPECT_FALSE(h.hold_back_until("a")) << "after one hold-back the client competes as usual";
  EXPECT_FALSE(h.hold_back_until("b"));
}

TEST(HandOffTest, AnEndedGraceHoldsNothingBack) {
  HandOff h;
  h.released("a", 1us);  // grace 3 ms
  std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(h.hold_back_until("a"));
}

TEST(HandOffTest, ManyNamesDoNotGrowWithoutBound) {
  HandOff h;
  for (int i = 0; i < 5000; ++i) h.released("n" + std::to_string(i), 1us);
  std::this_thread::sleep_for(10ms);
  for (int i = 0; i < 5000; ++i) h.released("m" + std::to_string(i), 1us);
  // Only checks that nothing breaks; the pruning itself is internal.
  EXPECT_TRUE(h.hold_back_until("m4999"));
}

}  // namespace
}  // namespace dlock::lock

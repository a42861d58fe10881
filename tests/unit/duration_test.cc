// SPDX-License-Identifier: MIT
#include "duration.h"

#include <gtest/gtest.h>

namespace dlock::cli {
namespace {

using namespace std::chrono_literals;

TEST(DurationTest, Suffixes) {
  EXPECT_EQ(*parse_duration("250ms"), 250ms);
  EXPECT_EQ(*parse_duration("3s"), 3000ms);
  EXPECT_EQ(*parse_duration("2m"), 120000ms);
  EXPECT_EQ(*parse_duration("1h"), 3600000ms);
}

TEST(DurationTest, PlainNumberIsSeconds) {
  EXPECT_EQ(*parse_duration("5"), 5000ms);
  EXPECT_EQ(*parse_duration("0"), 0ms);
}

TEST(DurationTest, Fractions) {
  EXPECT_EQ(*parse_duration("1.5s"), 1500ms);
  EXPECT_EQ(*parse_duration("0.25"), 250ms);
  EXPECT_EQ(*parse_duration("87600h"), std::chrono::hours(87600));  // ten years: the largest
}

TEST(DurationTest, RejectsBadInput) {
  for (const char* bad : {"", "s", "-1s", "-5", "1x", "1 s", "abc", "1.2.3s", "ms5", "1e3",
                          "99999999999999h", "87601h", "nan", "inf"}) {
    auto d = parse_duration(bad);
    EXPECT_FALSE(d) << bad;
    if (!d) {
      EXPECT_TRUE(d.error().is(errc::invalid_argument));
    }
  }
}

}  // namespace
}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// node::Strings, a call's keys or arguments in one buffer: each string reads back as written,
// past the strings kept in place too (indexed and walked), and replace() moves every later string
// with it.
#include "node/strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dlock::node {
namespace {

// n strings of different lengths, the empty string among them.
std::vector<std::string> sample(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(std::string(i % 5 == 0 ? 0 : 7 * i, 'a'));
  return out;
}

TEST(StringsTest, ReadsBackWhatWasWrittenInPlaceAndPastIt) {
  for (const std::size_t n : {0, 1, 7, 8, 9, 300}) {
    const auto expected = sample(n);
    Strings s;
    for (const auto& e : expected) s.push_back(e);
    ASSERT_EQ(s.size(), n);
    EXPECT_EQ(s.empty(), n == 0);
    EXPECT_EQ(s.to_vector(), expected) << n << " strings";
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(s[i], expected[i]) << i;
    std::vector<std::string> walked;  // for_each: the same strings, in order
    s.for_each([&walked](std::string_view v) { walked.emplace_back(v); });
    EXPECT_EQ(walked, expected) << n << " strings";
  }
}

// A moved-from Strings is empty and usable again (review: the defaults kept its count beside an
// emptied buffer, and a read past 8 strings went past the ends kept in place); copies and moves
// past the in-place ends read back alike.
TEST(StringsTest, MovedFromIsEmptyAndCopiesAndMovesReadBack) {
  for (const std::size_t n : {3, 8, 12}) {
    const auto expected = sample(n);
    Strings a(expected);
    Strings copy = a;
    EXPECT_EQ(copy.to_vector(), expected);
    Strings b = std::move(a);
    EXPECT_EQ(b.to_vector(), expected) << n;
    EXPECT_TRUE(a.empty()) << n;  // NOLINT(bugprone-use-after-move): what this test is about
    EXPECT_EQ(a.bytes(), 0u);
    a.push_back("again");
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0], "again");
    Strings c;
    c = std::move(b);
    EXPECT_EQ(c.to_vector(), expected) << n;
    EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
  }
}

TEST(StringsTest, ReplaceMovesTheStringsAfterIt) {
  for (const std::size_t n : {3, 8, 12}) {
    auto expected = sample(n);
    Strings s(expected);
    for (const std::size_t i : {std::size_t{0}, n / 2, n - 1}) {
      expected[i] = "replaced-" + std::to_string(i);
      s.replace(i, expected[i]);
      EXPECT_EQ(s.to_vector(), expected);
      expected[i].clear();
      s.replace(i, "");
      EXPECT_EQ(s.to_vector(), expected);
    }
  }
}

TEST(StringsTest, AWrittenStringIsWhatTheWriterAppended) {
  Strings s{"first"};
  s.push_back_written([](std::string& out) { out.append("pre").append("{name}"); });
  s.push_back("last");
  EXPECT_EQ(s.to_vector(), (std::vector<std::string>{"first", "pre{name}", "last"}));
  EXPECT_EQ(s.bytes(), 5U + 9U + 4U);
}

TEST(StringsTest, EqualOnlyWithTheSameStrings) {
  EXPECT_EQ(Strings({"ab", "c"}), Strings({"ab", "c"}));
  EXPECT_FALSE(Strings({"ab", "c"}) == Strings({"a", "bc"}));
  EXPECT_FALSE(Strings({"ab"}) == Strings({"ab", ""}));
}

}  // namespace
}  // namespace dlock::node

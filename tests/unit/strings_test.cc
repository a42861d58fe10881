// SPDX-License-Identifier: MIT
// node::Strings, a call's keys or arguments in one buffer: each string reads back as written,
// past the strings kept in place too, and replace() moves every later string with it.
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

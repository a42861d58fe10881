// SPDX-License-Identifier: MIT
// Holds' entry key (src/lock/hold.h): two different (name, owner, kind) triples never share an
// entry, whatever bytes the names and owners hold. A shared entry makes a second acquisition
// join the first's hold reentrantly without asking the nodes (the NUL-byte defect of 2f99b52).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "lock/hold.h"

namespace dlock::lock {
namespace {

// Every string of up to `max` bytes over the bytes a key's framing could confuse: NUL, the
// length's separator, a digit (a length's), and both kinds' letters.
std::vector<std::string> short_strings(std::size_t max) {
  static const std::string alphabet("\0:1wr", 5);
  std::vector<std::string> all{""};
  for (std::size_t begin = 0, length = 1; length <= max; ++length) {
    const std::size_t end = all.size();
    for (std::size_t i = begin; i < end; ++i) {
      for (char c : alphabet) all.push_back(all[i] + c);
    }
    begin = end;
  }
  return all;
}

TEST(HoldsTest, EntryKeysOfDifferentTriplesDiffer) {
  const auto strings = short_strings(3);  // 156 strings: 48,672 triples
  std::map<std::string, std::tuple<std::string, std::string, HoldKind>> seen;
  for (const auto& name : strings) {
    for (const auto& owner : strings) {
      for (HoldKind kind : {HoldKind::write, HoldKind::read}) {
        const auto triple = std::make_tuple(name, owner, kind);
        const auto [it, fresh] =
            seen.emplace(hold_entry_key(name, OwnerToken(owner), kind), triple);
        ASSERT_TRUE(fresh) << "two triples share an entry: (" << testing::PrintToString(name)
                           << ", " << testing::PrintToString(owner) << ") and ("
                           << testing::PrintToString(std::get<0>(it->second)) << ", "
                           << testing::PrintToString(std::get<1>(it->second)) << ")";
      }
    }
  }
  EXPECT_EQ(seen.size(), strings.size() * strings.size() * 2);
}

TEST(HoldsTest, AnEntryKeyIsTheSameForTheSameTriple) {
  const std::string name("a\0b", 3);
  EXPECT_EQ(hold_entry_key(name, OwnerToken("o"), HoldKind::read),
            hold_entry_key(std::string(name), OwnerToken(std::string("o")), HoldKind::read));
  EXPECT_NE(hold_entry_key(name, OwnerToken("o"), HoldKind::read),
            hold_entry_key(name, OwnerToken("o"), HoldKind::write));
}

}  // namespace
}  // namespace dlock::lock

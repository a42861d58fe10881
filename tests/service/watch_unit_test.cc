// SPDX-License-Identifier: MIT
// Watch's pure part: which holder a status shows, and what counts as a change of holder.
#include <gtest/gtest.h>

#include "service/watch.h"

namespace dlock::service {
namespace {

NodeLockState node(std::string owner = "", std::string hold = "", std::uint64_t fence = 0) {
  NodeLockState n;
  n.node = "127.0.0.1:1";
  if (!owner.empty()) {
    n.kind = KeyKind::dlock;
    n.owners.push_back(NodeHolder{OwnerToken(owner), std::move(hold)});
  }
  n.fence = FencingToken(fence);
  return n;
}

NodeLockState down() {
  NodeLockState n;
  n.error =
      NodeError{"127.0.0.1:2", std::make_error_code(std::errc::connection_refused), "refused"};
  return n;
}

LockStatus status(bool held, std::vector<NodeLockState> nodes) {
  return LockStatus{"job", held, nodes.size() / 2 + 1, std::move(nodes)};
}

TEST(ServiceWatchTest, TheHolderIsTheOwnerAQuorumAgreesOn) {
  auto s = watch_state(status(true, {node("a", "h1", 7), node("a", "h1", 9), down()}));
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->held);
  EXPECT_EQ(s->owner, "a");
  EXPECT_EQ(s->fence, 9u);  // the largest counter any answering node reports
  auto free = watch_state(status(false, {node(), node("a", "h1"), node()}));
  ASSERT_TRUE(free);
  EXPECT_FALSE(free->held);
  EXPECT_EQ(free->owner, "");  // a minority's stale key is no holder
}

TEST(ServiceWatchTest, FewerThanAQuorumAnsweringIsUnknown) {
  EXPECT_FALSE(watch_state(status(false, {node("a", "h1"), down(), down()})));
}

TEST(ServiceWatchTest, ANewHoldOfTheSameOwnerIsAChangeAndTheFenceAloneIsNot) {
  auto first = watch_state(status(true, {node("a", "h1", 1), node("a", "h1", 1), node()}));
  auto again = watch_state(status(true, {node("a", "h2", 2), node("a", "h2", 2), node()}));
  auto other_name_granted =
      watch_state(status(true, {node("a", "h1", 5), node("a", "h1", 5), node()}));
  ASSERT_TRUE(first && again && other_name_granted);
  EXPECT_FALSE(first->same_holder(*again));
  EXPECT_TRUE(first->same_holder(*other_name_granted));
}

TEST(ServiceWatchTest, ReadersHoldWithoutAnOwner) {
  std::vector<NodeLockState> nodes(3, node());
  for (auto& n : nodes) {
    n.kind = KeyKind::shared;
    n.readers.push_back(NodeReader{OwnerToken("r1"), "h", std::chrono::milliseconds(100)});
  }
  auto one = watch_state(status(true, nodes));
  for (auto& n : nodes) {
    n.readers.push_back(NodeReader{OwnerToken("r2"), "h", std::chrono::milliseconds(100)});
  }
  auto two = watch_state(status(true, nodes));
  ASSERT_TRUE(one && two);
  EXPECT_TRUE(one->held);
  EXPECT_EQ(one->owner, "");
  EXPECT_FALSE(one->same_holder(*two));  // another reader joined
}

}  // namespace
}  // namespace dlock::service

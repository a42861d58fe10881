// SPDX-License-Identifier: MIT
// Reentrancy and ownership on 1 and 5 nodes.
#include <thread>

#include "core/access.h"
#include "support/cluster_fixture.h"
#include "support/lock_key.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;

class ReentrancyTest : public test::ClusterTest {};

TEST_P(ReentrancyTest, SameThreadTakesItAgainAndFreesItAtCountZero) {
  Client client = make_client();
  auto outer = client.try_lock("job", fixed(10s));
  ASSERT_TRUE(outer) << outer.error().message();
  auto inner = client.try_lock("job", fixed(10s));
  ASSERT_TRUE(inner) << inner.error().message();
  auto innermost = client.lock("job", 1s, fixed(10s));
  ASSERT_TRUE(innermost) << innermost.error().message();
  EXPECT_EQ(inner->fencing_token(), outer->fencing_token());
  // Reentrant leases share one hold: the nodes see one owner, whatever the count.
  for (std::size_t i = 0; i < size(); ++i) {
    // The lock key holds one hold (HLEN 1 of the hash it was), the client's default owner's.
    const auto held = test::lock_key_hold((*nodes_)[i], "job");
    ASSERT_TRUE(held) << "node " << i;
    EXPECT_EQ(held->owner, Client::default_owner().str());
  }
  ASSERT_TRUE(innermost->unlock());
  ASSERT_TRUE(inner->unlock());
  expect_held_everywhere("job");
  ASSERT_TRUE(outer->unlock());
  expect_released_everywhere("job");
}

TEST_P(ReentrancyTest, AnotherThreadIsAnotherOwner) {
  Client client = make_client();
  auto mine = client.try_lock("job", fixed(10s));
  ASSERT_TRUE(mine);
  std::thread([&] {
    auto theirs = client.try_lock("job", fixed(10s));
    EXPECT_FALSE(theirs);
    EXPECT_TRUE(theirs.error().is(errc::lock_held));
  }).join();
}

TEST_P(ReentrancyTest, NonOwnerUnlockIsRefusedAndDeletesNothing) {
  Client client = make_client();
  auto mine = client.try_lock("job", fixed(10s));
  ASSERT_TRUE(mine);
  auto r = client.unlock("job", OwnerToken("not-me"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::not_owner)) << r.error().message();
  EXPECT_NE(r.error().message().find("not held by owner 'not-me'"), std::string::npos);
  expect_held_everywhere("job");
}

TEST_P(ReentrancyTest, NamedOwnerHandsTheLockToAnotherThread) {
  Client client = make_client();
  LockOptions o = fixed(10s, "job-42");
  auto lease = client.try_lock("job", o);
  ASSERT_TRUE(lease) << lease.error().message();
  std::thread([&] {
    auto again = client.try_lock("job", o);  // same named owner: a reentrant hold
    ASSERT_TRUE(again) << again.error().message();
    ASSERT_TRUE(again->unlock());
    ASSERT_TRUE(client.unlock("job", OwnerToken("job-42")));  // releases the first hold
  }).join();
  expect_released_everywhere("job");
  auto stale = lease->unlock();
  EXPECT_FALSE(stale);
}

// detail::detach() (for `dlock acquire`): the lease lets go without releasing; the lock stays on
// the nodes until its ttl ends or its owner releases it by name, from this client or another.
TEST_P(ReentrancyTest, DetachedLeaseLeavesTheLockForItsOwnerToRelease) {
  Client client = make_client();
  auto lease = client.try_lock("job", fixed(10s, "job-7"));
  ASSERT_TRUE(lease) << lease.error().message();
  auto owner = detail::detach(*lease);
  ASSERT_TRUE(owner) << owner.error().message();
  EXPECT_EQ(owner->str(), "job-7");
  EXPECT_FALSE(lease->is_held());
  EXPECT_TRUE(detail::detach(*lease).error().is(errc::invalid_argument)) << "empty after detach";
  *lease = Lease();  // destroying it releases nothing
  expect_held_everywhere("job");
  Client other = make_client();
  EXPECT_FALSE(other.try_lock("job", fixed(10s, "someone-else")));
  ASSERT_TRUE(other.unlock("job", *owner));
  expect_released_everywhere("job");
}

TEST_P(ReentrancyTest, DetachedLeaseIsNotRenewedAndEndsWithItsTtl) {
  Client client = make_client();
  auto lease = client.try_lock("job", renewed(600ms, "job-8"));  // the watchdog renews it
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(detail::detach(*lease));
  EXPECT_TRUE(test::eventually([&] { return nodes_with("job") == 0; }, 5s))
      << "still renewed after detach";
}

TEST_P(ReentrancyTest, DetachOfAReleasedOrExpiredLeaseIsRefused) {
  Client client = make_client();
  auto released = client.try_lock("job", fixed(10s));
  ASSERT_TRUE(released && released->unlock());
  EXPECT_TRUE(detail::detach(*released).error().is(errc::not_owner));
  auto expired = client.try_lock("job", fixed(300ms));
  ASSERT_TRUE(expired);
  std::this_thread::sleep_for(400ms);
  EXPECT_TRUE(detail::detach(*expired).error().is(errc::lock_lost));
}

INSTANTIATE_TEST_SUITE_P(Nodes, ReentrancyTest, ::testing::Values(1, 5), test::node_count_name);

}  // namespace
}  // namespace dlock

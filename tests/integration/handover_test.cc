// SPDX-License-Identifier: MIT
// A lock handed over across clients (as the lock service and `dlock acquire` do): a lease is
// detached from the client that took it, and any other client extends or releases it by its
// owner token alone. On 1 and 3 real redis-servers.
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <thread>

#include "support/redis_server.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::RedisCluster;

class HandoverTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    nodes_ = std::make_unique<RedisCluster>(GetParam());
  }
  Client make_client() {
    ClientOptions options;
    options.nodes = nodes_->urls();
    auto c = Client::create(options);
    EXPECT_TRUE(c) << c.error().message();
    return std::move(c).value();
  }
  static LockOptions explicit_lease(std::chrono::milliseconds ttl, const std::string& owner) {
    LockOptions o;
    o.ttl = ttl;
    o.auto_renew = false;
    o.owner = OwnerToken(owner);
    return o;
  }
  std::unique_ptr<RedisCluster> nodes_;
};

TEST_P(HandoverTest, ADetachedLeaseStaysHeldAndAnotherClientReleasesIt) {
  Client taker = make_client();
  Client other = make_client();
  auto lease = taker.try_lock("job", explicit_lease(10s, "handed"));
  ASSERT_TRUE(lease) << lease.error().message();
  auto owner = lease->detach();
  ASSERT_TRUE(owner) << owner.error().message();
  EXPECT_EQ(owner->str(), "handed");
  EXPECT_FALSE(lease->is_held());
  { Lease gone = std::move(*lease); }  // an emptied lease releases nothing as it ends
  EXPECT_TRUE(other.status("job")->held);
  EXPECT_TRUE(other.try_lock("job", explicit_lease(10s, "intruder")).error().is(errc::lock_held));
  EXPECT_TRUE(other.unlock("job", OwnerToken("intruder")).error().is(errc::not_owner));
  ASSERT_TRUE(other.unlock("job", *owner));
  EXPECT_FALSE(other.status("job")->held);
  EXPECT_TRUE(other.try_lock("job", explicit_lease(10s, "next")));
}

TEST_P(HandoverTest, AnotherClientExtendsByOwnerAndTheLockOutlivesItsFirstTtl) {
  Client taker = make_client();
  Client other = make_client();
  // 1.5 s: `other`'s first call greets the nodes before it extends (400 ms could be gone first
  // on a busy machine).
  auto lease = taker.try_lock("job", explicit_lease(1500ms, "handed"));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->detach());
  auto validity = other.extend("job", OwnerToken("handed"), 10s);
  ASSERT_TRUE(validity) << validity.error().message();
  EXPECT_GT(*validity, 5s);  // 10 s less one round trip and the drift, on a busy machine
  EXPECT_LE(*validity, 10s);
  std::this_thread::sleep_for(3s);  // twice the first ttl
  EXPECT_TRUE(other.try_lock("job", explicit_lease(10s, "intruder")).error().is(errc::lock_held));
  EXPECT_TRUE(other.unlock("job", OwnerToken("handed")));
}

TEST_P(HandoverTest, ExtendByAnotherOwnerOrAfterExpiryIsLostAndReArmsNothing) {
  Client taker = make_client();
  Client other = make_client();
  auto lease = taker.try_lock("job", explicit_lease(300ms, "handed"));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->detach());
  EXPECT_TRUE(other.extend("job", OwnerToken("intruder"), 10s).error().is(errc::lock_lost));
  // The wrong owner's extension did not keep the key alive past its own ttl.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (other.status("job")->held && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(other.status("job")->held);
  EXPECT_TRUE(other.extend("job", OwnerToken("handed"), 10s).error().is(errc::lock_lost));
  EXPECT_FALSE(other.status("job")->held);
}

TEST_P(HandoverTest, ExtendRefusesBadInput) {
  Client client = make_client();
  EXPECT_TRUE(client.extend("", OwnerToken("o"), 1s).error().is(errc::invalid_argument));
  EXPECT_TRUE(client.extend("job", OwnerToken(""), 1s).error().is(errc::invalid_argument));
  EXPECT_TRUE(client.extend("job", OwnerToken("o"), 0ms).error().is(errc::invalid_argument));
  EXPECT_TRUE(Lease().detach().error().is(errc::invalid_argument));
}

TEST_P(HandoverTest, AReleasedLeaseCannotBeDetached) {
  Client client = make_client();
  auto lease = client.try_lock("job", explicit_lease(10s, "handed"));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->unlock());
  EXPECT_TRUE(lease->detach().error().is(errc::not_owner));
}

// Named by node count as the other Nodes/ suites ("1nodes": label one_node, tests/labels.cmake).
std::string by_node_count(const ::testing::TestParamInfo<std::size_t>& param_info) {
  return std::to_string(param_info.param) + "nodes";
}
INSTANTIATE_TEST_SUITE_P(Nodes, HandoverTest, ::testing::Values(1, 3), by_node_count);

}  // namespace
}  // namespace dlock

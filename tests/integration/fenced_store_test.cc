// SPDX-License-Identifier: MIT
// FencedStore: a Redis-kept resource that refuses writes with stale fencing tokens, and the
// story it exists for: a holder paused past its lease writes late and is refused.
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <thread>

#include "support/redis_server.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

class FencedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    lock_node_ = std::make_unique<RedisServer>();
    resource_ = std::make_unique<RedisServer>();
  }
  // The resource's store with a 2 s node timeout: what is tested is the fencing, and the 200 ms
  // default ran out on a write with 24 tests at once on 2 cores.
  Result<FencedStore> store() const {
    ClientOptions options;
    options.node_timeout = 2s;
    return FencedStore::connect(resource_->url(), options);
  }
  std::unique_ptr<RedisServer> lock_node_;
  std::unique_ptr<RedisServer> resource_;
};

TEST_F(FencedStoreTest, AcceptsTheSameOrANewerTokenAndRefusesAnOlderOne) {
  auto store = this->store();
  ASSERT_TRUE(store) << store.error().message();
  EXPECT_EQ(*store->write("balance", "100", FencingToken(5)), true);
  EXPECT_EQ(*store->write("balance", "110", FencingToken(5)), true);
  EXPECT_EQ(*store->write("balance", "90", FencingToken(4)), false);
  EXPECT_EQ(**store->read("balance"), "110");
  EXPECT_EQ(store->last_token("balance")->value(), 5u);
  EXPECT_EQ(*store->write("balance", "120", FencingToken(6)), true);
  EXPECT_EQ(store->last_token("balance")->value(), 6u);
  EXPECT_FALSE(store->read("missing")->has_value());
}

TEST_F(FencedStoreTest, AFencedReadShutsOutOlderWriters) {
  auto store = this->store();
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->write("balance", "100", FencingToken(3)), true);
  auto read = store->read("balance", FencingToken(7));  // a newer holder looks first
  ASSERT_TRUE(read);
  EXPECT_TRUE(read->accepted);
  EXPECT_EQ(read->value, "100");
  EXPECT_EQ(*store->write("balance", "90", FencingToken(5)), false) << "older than the reader";
  auto stale = store->read("balance", FencingToken(6));
  ASSERT_TRUE(stale);
  EXPECT_FALSE(stale->accepted);
  EXPECT_EQ(*store->write("balance", "110", FencingToken(7)), true);
}

TEST_F(FencedStoreTest, RejectsBadInput) {
  auto store = this->store();
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->write("", "x", FencingToken(1)).error().is(errc::invalid_argument));
  EXPECT_TRUE(store->write("k", "x", FencingToken(0)).error().is(errc::invalid_argument));
  EXPECT_FALSE(FencedStore::connect("nope://x"));
}

TEST_F(FencedStoreTest, HolderPausedPastItsLeaseIsRefusedItsLateWrite) {
  ClientOptions options;
  options.nodes = {lock_node_->url()};
  Client client = std::move(Client::create(options)).value();
  auto store = std::move(this->store()).value();
  LockOptions lease;
  lease.ttl = 300ms;
  lease.auto_renew = false;
  lease.owner = OwnerToken("slow-holder");
  // The client greets its node first, with a longer ttl, so the 300 ms lease below is one
  // round: under TSan a first greeting took longer than the lease (CI here: "slow" refused).
  LockOptions longer = lease;
  longer.ttl = 10s;
  auto warm_up = client.lock("warm-up", 10s, longer);
  ASSERT_TRUE(warm_up) << warm_up.error().message();
  ASSERT_TRUE(warm_up->unlock());
  auto slow = client.lock("account", 5s, lease);
  ASSERT_TRUE(slow) << slow.error().message();
  const FencingToken slow_token = slow->fencing_token();
  std::this_thread::sleep_for(600ms);  // a GC pause, longer than the lease
  EXPECT_FALSE(slow->is_held());
  lease.owner = OwnerToken("next-holder");
  auto next = client.try_lock("account", lease);
  ASSERT_TRUE(next) << next.error().message();
  EXPECT_GT(next->fencing_token(), slow_token);
  EXPECT_EQ(*store.write("account", "written by next", next->fencing_token()), true);
  EXPECT_EQ(*store.write("account", "late write", slow_token), false);
  EXPECT_EQ(**store.read("account"), "written by next");
}

}  // namespace
}  // namespace dlock

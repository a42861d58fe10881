// SPDX-License-Identifier: MIT
// A GoogleTest fixture parametrized by node count: each feature is tested on 1 node (the
// single-instance lock) and on 5 (Redlock), through the same code path.
#pragma once

#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "lock/keys.h"
#include "support/lock_clients.h"
#include "support/redis_server.h"

namespace dlock::test {

class ClusterTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    nodes_ = std::make_unique<RedisCluster>(static_cast<std::size_t>(GetParam()));
  }
  Client make_client(std::chrono::milliseconds node_timeout = std::chrono::milliseconds(500)) {
    ClientOptions options;
    options.nodes = nodes_->urls();
    options.node_timeout = node_timeout;
    options.reconnect_backoff_min = std::chrono::milliseconds(20);
    options.reconnect_backoff_max = std::chrono::milliseconds(200);
    auto c = Client::create(options);
    EXPECT_TRUE(c) << c.error().message();
    return std::move(c).value();
  }
  static LockOptions renewed(std::chrono::milliseconds ttl, std::string owner = {}) {
    return test::renewed(ttl, std::move(owner));
  }
  static LockOptions fixed(std::chrono::milliseconds ttl, std::string owner = {}) {
    return test::fixed(ttl, std::move(owner));
  }
  std::size_t nodes_with(const std::string& key) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < nodes_->size(); ++i) {
      if ((*nodes_)[i].running() && (*nodes_)[i].exists(key)) ++n;
    }
    return n;
  }
  // An acquire waits for every node; a release returns as soon as a quorum confirmed, without
  // waiting for the other nodes' replies: a quorum is free at once, every live node soon after.
  void expect_held_everywhere(const std::string& key) { EXPECT_EQ(nodes_with(key), size()); }
  void expect_released_everywhere(const std::string& key) {
    EXPECT_LE(nodes_with(key), size() - quorum());
    EXPECT_TRUE(eventually([&] { return nodes_with(key) == 0; }, std::chrono::seconds(5)))
        << key << " is still on " << nodes_with(key) << " of " << size() << " nodes";
  }
  // Whether some client listens for releases of `name` on every node: a lock() that found it
  // held is then waiting.
  bool someone_waits_for(const std::string& name) {
    for (std::size_t i = 0; i < size(); ++i) {
      auto r = (*nodes_)[i].command({"PUBSUB", "NUMSUB", lock::release_channel(name)});
      if (!r || r->elements < 2 || r->element[1]->integer < 1) return false;
    }
    return true;
  }
  std::size_t size() const { return nodes_->size(); }
  std::size_t quorum() const { return nodes_->size() / 2 + 1; }
  // Kills enough nodes that no quorum is left.
  void kill_majority() {
    for (std::size_t i = 0; i < quorum(); ++i) (*nodes_)[i].kill9();
  }
  std::unique_ptr<RedisCluster> nodes_;
};

inline std::string node_count_name(const ::testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "nodes";
}

}  // namespace dlock::test

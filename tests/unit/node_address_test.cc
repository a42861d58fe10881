// SPDX-License-Identifier: MIT
#include "net/node_address.h"

#include <gtest/gtest.h>

namespace dlock::net {
namespace {

TEST(NodeAddressTest, ParsesHostAndPort) {
  auto a = parse_node_url("redis://127.0.0.1:7000");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_FALSE(a->tls);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 7000);
  EXPECT_EQ(a->db, 0);
  EXPECT_TRUE(a->user.empty());
  EXPECT_TRUE(a->password.empty());
}

TEST(NodeAddressTest, DefaultsPortTo6379) {
  auto a = parse_node_url("redis://cache.internal");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->port, 6379);
}

TEST(NodeAddressTest, ParsesUserPasswordAndDb) {
  auto a = parse_node_url("rediss://alice:s%40cret@redis.example:6380/3");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_TRUE(a->tls);
  EXPECT_EQ(a->user, "alice");
  EXPECT_EQ(a->password, "s@cret");
  EXPECT_EQ(a->db, 3);
}

TEST(NodeAddressTest, PasswordWithoutUser) {
  auto a = parse_node_url("redis://:hunter2@localhost:6379");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->user.empty());
  EXPECT_EQ(a->password, "hunter2");
}

TEST(NodeAddressTest, Ipv6Literal) {
  auto a = parse_node_url("redis://[::1]:7001");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->display(), "redis://[::1]:7001");
}

TEST(NodeAddressTest, DisplayNeverShowsThePassword) {
  auto a = parse_node_url("redis://bob:topsecret@h:1/2");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->display(), "redis://bob@h:1/2");
}

TEST(NodeAddressTest, IdentityIgnoresCaseAndLocalhostAlias) {
  EXPECT_EQ(parse_node_url("redis://LOCALHOST:1")->identity(),
            parse_node_url("redis://127.0.0.1:1/4")->identity());
}

TEST(NodeAddressTest, RejectsMalformedUrls) {
  for (const char* bad : {"", "127.0.0.1:6379", "http://h:1", "redis://", "redis://h:0",
                          "redis://h:70000", "redis://h:abc", "redis://h:1/x", "redis://h:1/-1",
                          "redis://h :1", "redis://h:1?db=2", "redis://h:1#frag"}) {
    auto a = parse_node_url(bad);
    ASSERT_FALSE(a) << bad;
    EXPECT_TRUE(a.error().is(errc::invalid_argument)) << bad;
    EXPECT_NE(a.error().message().find("invalid node URL"), std::string::npos) << bad;
  }
}

TEST(NodeAddressTest, ErrorHidesThePassword) {
  auto a = parse_node_url("redis://u:pw123@h:99999");
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message().find("pw123"), std::string::npos) << a.error().message();
}

}  // namespace
}  // namespace dlock::net

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
  for (const char* bad : {"",
                          "127.0.0.1:6379",
                          "http://h:1",
                          "redis://",
                          "redis://h:0",
                          "redis://h:70000",
                          "redis://h:abc",
                          "redis://h:1/x",
                          "redis://h:1/-1",
                          "redis://h :1",
                          "redis://h:1?db=2",
                          "redis://h:1#frag",
                          "redis://h:1?",
                          "redis://h:1#",
                          "redis://h!:1",
                          "redis://h$x:1",
                          "redis://[v1.x]:1",
                          "redis://[::1",
                          "redis://[::1]x:1",
                          "redis://h:1:2",
                          "redis://h:1/./2",
                          "redis://h\\x:1",
                          "redis://h:1/a/b"}) {
    auto a = parse_node_url(bad);
    ASSERT_FALSE(a) << bad;
    EXPECT_TRUE(a.error().is(errc::invalid_argument)) << bad;
    EXPECT_NE(a.error().message().find("invalid node URL"), std::string::npos) << bad;
  }
}

TEST(NodeAddressTest, APercentEncodedHostIsDecoded) {
  auto a = parse_node_url("redis://cache%2Dthree.internal:7000");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->host, "cache-three.internal");
}

TEST(NodeAddressTest, AnAddressIsWrittenInItsStandardForm) {
  // One server written two ways must be one identity: the check that no node is given twice
  // (Client::create) compares identities, and a node given twice would vote twice.
  for (const char* same : {"redis://127.1:7000", "redis://2130706433:7000",
                           "redis://0177.0.0.1:7000", "redis://0x7f.0.0.1:7000"}) {
    auto a = parse_node_url(same);
    ASSERT_TRUE(a) << same << ": " << a.error().message();
    EXPECT_EQ(a->host, "127.0.0.1") << same;
    EXPECT_EQ(a->identity(), parse_node_url("redis://127.0.0.1:7000")->identity()) << same;
  }
  for (const char* same : {"redis://[0:0:0:0:0:0:0:1]:7000", "redis://[::0001]:7000"}) {
    auto a = parse_node_url(same);
    ASSERT_TRUE(a) << same << ": " << a.error().message();
    EXPECT_EQ(a->host, "::1") << same;
  }
  EXPECT_EQ(parse_node_url("redis://[::FFFF:1.2.3.4]:1")->host, "::ffff:1.2.3.4");
  EXPECT_EQ(parse_node_url("redis://Cache.Internal:1")->host, "Cache.Internal");
}

TEST(NodeAddressTest, APasswordIsTakenAsWrittenWhereRfc3986WouldWantItEncoded) {
  // Generated passwords hold such characters; users paste them unencoded.
  for (const std::string password : {"p^ss", "p{s}", "p|s", "p\"s", "p<s>", "p`s", "p[s]", "p\\s",
                                     "p\xc3\xa4", "100%", "abc%zz", "a@b", "p%2"}) {
    auto a = parse_node_url("redis://:" + password + "@h:1/2");
    ASSERT_TRUE(a) << password << ": " << a.error().message();
    EXPECT_EQ(a->password, password);
    EXPECT_EQ(a->host, "h");
    EXPECT_EQ(a->db, 2);
  }
  auto user = parse_node_url("redis://a@b:p%40@h:1");
  ASSERT_TRUE(user) << user.error().message();
  EXPECT_EQ(user->user, "a@b");
  EXPECT_EQ(user->password, "p@");
  auto sentinel = parse_node_url("redis-sentinel://:p^s@h/m");
  ASSERT_TRUE(sentinel) << sentinel.error().message();
  EXPECT_EQ(sentinel->password, "p^s");
}

TEST(NodeAddressTest, NothingAfterANulIsDroppedUnseen) {
  auto a = parse_node_url(std::string_view("redis://h\0evil:1", 16));
  EXPECT_FALSE(a) << "a NUL inside a URL must not end it";
}

TEST(NodeAddressTest, AUserNameWithAControlCharacterIsRefused) {
  EXPECT_FALSE(parse_node_url("redis://a%0Ab:pw@h:1"));
  auto a = parse_node_url("redis://u:p%0Aw@h:1");  // a password is never shown: any bytes
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->password, "p\nw");
}

TEST(NodeAddressTest, ASentinelWithAnEmptyPortIsOnTheSentinelsPort) {
  auto a = parse_node_url("redis-sentinel://h1:,h2/m");
  ASSERT_TRUE(a) << a.error().message();
  ASSERT_EQ(a->sentinels.size(), 2u);
  EXPECT_EQ(a->sentinels[0].second, 26379);
}

TEST(NodeAddressTest, ErrorHidesThePassword) {
  // The second: a password with a '/' reads as a path, which the error must not repeat.
  for (const auto& [url, secret] : {std::pair{"redis://u:pw123@h:99999", "pw123"},
                                    std::pair{"redis://user:123/s3cret@host", "s3cret"}}) {
    auto a = parse_node_url(url);
    ASSERT_FALSE(a) << url;
    EXPECT_EQ(a.error().message().find(secret), std::string::npos) << a.error().message();
  }
}

TEST(NodeAddressTest, ClusterUrlNamesASeedServer) {
  auto a = parse_node_url("rediss-cluster://bob:pw@10.0.0.7:7001");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->kind, NodeAddress::Kind::cluster);
  EXPECT_TRUE(a->tls);
  EXPECT_EQ(a->host, "10.0.0.7");
  EXPECT_EQ(a->port, 7001);
  EXPECT_EQ(a->user, "bob");
  EXPECT_EQ(a->password, "pw");
  EXPECT_EQ(a->display(), "rediss-cluster://bob@10.0.0.7:7001");
  EXPECT_FALSE(parse_node_url("redis-cluster://10.0.0.7:7001/1")) << "a cluster has only db 0";
}

TEST(NodeAddressTest, SentinelUrlListsSentinelsAndTheMasterName) {
  auto a = parse_node_url("redis-sentinel://:s%40cret@s1:26380,[::1],10.0.0.3:26381/orders");
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->kind, NodeAddress::Kind::sentinel);
  EXPECT_EQ(a->master_name, "orders");
  EXPECT_EQ(a->password, "s@cret");
  ASSERT_EQ(a->sentinels.size(), 3u);
  EXPECT_EQ(a->sentinels[0], (std::pair<std::string, std::uint16_t>{"s1", 26380}));
  EXPECT_EQ(a->sentinels[1], (std::pair<std::string, std::uint16_t>{"::1", 26379}));
  EXPECT_EQ(a->sentinels[2], (std::pair<std::string, std::uint16_t>{"10.0.0.3", 26381}));
  EXPECT_EQ(a->display(), "redis-sentinel://s1:26380,[::1]:26379,10.0.0.3:26381/orders");
  // The master's address comes from the sentinels: one with the same sentinels and name is the
  // same node however its first sentinel is written.
  EXPECT_EQ(a->identity(), a->display());
}

TEST(NodeAddressTest, BadSentinelUrlsSayWhy) {
  for (const char* url :
       {"redis-sentinel://s1:26379", "redis-sentinel://s1:26379/", "redis-sentinel://s1,,s2/m",
        "redis-sentinel://s1:0/m", "redis-sentinel://s1/a/b", "redis-sentinel:///m"}) {
    auto a = parse_node_url(url);
    ASSERT_FALSE(a) << url;
    EXPECT_TRUE(a.error().is(errc::invalid_argument)) << url;
  }
  auto a = parse_node_url("redis-sentinel://:topsecret@s1:26379");
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message().find("topsecret"), std::string::npos) << a.error().message();
}

}  // namespace
}  // namespace dlock::net

// SPDX-License-Identifier: MIT
// Redis Cluster routing as pure logic: CLUSTER SLOTS and redirect parsing, and the boot
// identity a cluster or sentinel node reports (hash slots and tags: keys_test.cc).
#include "node/cluster_topology.h"

#include <gtest/gtest.h>

#include "node/server_identity.h"

namespace dlock::node {
namespace {

resp::Reply integer(long long v) {
  resp::Reply r;
  r.type = resp::Reply::Type::integer;
  r.integer = v;
  return r;
}

resp::Reply string(std::string s) {
  resp::Reply r;
  r.type = resp::Reply::Type::string;
  r.str = std::move(s);
  return r;
}

resp::Reply array(std::vector<resp::Reply> elements) {
  resp::Reply r;
  r.type = resp::Reply::Type::array;
  r.elements = std::move(elements);
  return r;
}

resp::Reply error(std::string s) {
  resp::Reply r;
  r.type = resp::Reply::Type::error;
  r.str = std::move(s);
  return r;
}

TEST(ClusterTopologyTest, ParsesClusterSlots) {
  auto reply = array({
      array({integer(0), integer(5460), array({string("10.0.0.1"), integer(7000), string("id1")}),
             array({string("10.0.0.4"), integer(7003), string("id4")})}),
      array({integer(5461), integer(16383), array({string(""), integer(7001)})}),
  });
  auto ranges = parse_cluster_slots(reply, "seed.example");
  ASSERT_TRUE(ranges) << ranges.error().message();
  ASSERT_EQ(ranges->size(), 2u);
  EXPECT_EQ((*ranges)[0].first, 0);
  EXPECT_EQ((*ranges)[0].last, 5460);
  EXPECT_EQ((*ranges)[0].host, "10.0.0.1");
  EXPECT_EQ((*ranges)[0].port, 7000);
  EXPECT_EQ((*ranges)[0].id, "id1");
  EXPECT_EQ((*ranges)[1].host, "seed.example") << "an unknown endpoint is the server asked";
}

TEST(ClusterTopologyTest, RejectsMalformedSlotReplies) {
  auto not_cluster =
      parse_cluster_slots(error("ERR This instance has cluster support disabled"), "h");
  ASSERT_FALSE(not_cluster);
  EXPECT_TRUE(not_cluster.error().is(errc::invalid_argument));
  for (const auto& bad :
       {string("x"), array({integer(1)}),
        array({array({integer(10), integer(5), array({string("h"), integer(1)})})}),
        array({array({integer(0), integer(16384), array({string("h"), integer(1)})})}),
        array({array({integer(0), integer(1), array({string("h"), integer(70000)})})})}) {
    auto r = parse_cluster_slots(bad, "h");
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().is(errc::protocol_error)) << r.error().message();
  }
}

TEST(ClusterTopologyTest, ParsesRedirects) {
  auto moved = parse_redirect(error("MOVED 3999 127.0.0.1:6381"));
  ASSERT_TRUE(moved);
  EXPECT_FALSE(moved->ask);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->host, "127.0.0.1");
  EXPECT_EQ(moved->port, 6381);
  auto ask = parse_redirect(error("ASK 12 [::1]:7002"));
  ASSERT_TRUE(ask);
  EXPECT_TRUE(ask->ask);
  EXPECT_EQ(ask->host, "::1");
  auto same_host = parse_redirect(error("MOVED 1 :7005"));
  ASSERT_TRUE(same_host);
  EXPECT_EQ(same_host->host, "") << "the server that said it";
  EXPECT_EQ(same_host->port, 7005);
  for (const char* other : {"ERR no", "MOVED x h:1", "MOVED 16384 h:1", "ASK 1 h", "MOVED 1 h:0"}) {
    EXPECT_FALSE(parse_redirect(error(other))) << other;
  }
  EXPECT_FALSE(parse_redirect(string("MOVED 1 h:1"))) << "only an error reply redirects";
}

// Every replica of the server asked that the cluster did not agree has failed: one paused or
// only suspected ("fail?") may still be promoted with what it had (the record of a new ttl must
// be on it too); one flagged "fail" cannot win the votes while it is failed.
TEST(ClusterTopologyTest, TheReplicasOfMyselfAreEveryNodeNamingItsIdButFailedOnes) {
  const std::string nodes =
      "m1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n"
      "r1 127.0.0.1:7003@17003 slave m1 0 1700000000000 1 connected\n"
      "r2 127.0.0.1:7004@17004 slave,fail? m1 1700000000000 1700000000000 1 disconnected\n"
      "r4 127.0.0.1:7006@17006 slave,fail m1 1700000000000 1700000000000 1 disconnected\n"
      "m2 127.0.0.1:7001@17001 master - 0 1700000000000 2 connected 5461-16383\n"
      "r3 127.0.0.1:7005@17005 slave m2 0 1700000000000 2 connected\n";
  EXPECT_EQ(replicas_of_myself(nodes), 2u);
  EXPECT_EQ(replicas_of_myself("m1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-16383\n"),
            0u);
  const std::string replica =
      "r1 127.0.0.1:7003@17003 myself,slave m1 0 0 1 connected\n"
      "m1 127.0.0.1:7000@17000 master - 0 0 1 connected 0-16383\n";
  EXPECT_FALSE(replicas_of_myself(replica))
      << "a master demoted since the record: its replicas are not the ones to count";
  EXPECT_FALSE(replica_addresses_of_myself(replica));
  EXPECT_FALSE(replicas_of_myself("ERR This instance has cluster support disabled"));
  EXPECT_FALSE(replicas_of_myself(""));
  const auto addresses = replica_addresses_of_myself(
      nodes + "r5 10.0.0.9:7007@17007,replica-5.example slave m1 0 1 1 connected\n");
  ASSERT_TRUE(addresses);
  EXPECT_EQ(*addresses,
            (std::vector<std::string>{"127.0.0.1:7003", "127.0.0.1:7004", "10.0.0.9:7007"}));
}

// The replicas connected to a master now, by its INFO replication, whatever their state; a
// server that is no master names none (nullopt).
TEST(ClusterTopologyTest, TheConnectedReplicasAreTheSlaveLinesOfAMastersInfo) {
  const std::string info =
      "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"
      "slave0:ip=127.0.0.1,port=7003,state=online,offset=100,lag=0\r\n"
      "slave1:ip=::1,port=7004,state=wait_bgsave,offset=0,lag=0\r\n"
      "master_failover_state:no-failover\r\nmaster_replid:abc\r\n";
  const auto connected = connected_replicas(info);
  ASSERT_TRUE(connected);
  EXPECT_EQ(*connected, (std::vector<std::string>{"127.0.0.1:7003", "::1:7004"}));
  const auto none = connected_replicas("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(connected_replicas(
      "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7000\r\n"));
  EXPECT_FALSE(connected_replicas("ERR unknown command"));
}

// WAIT counts acknowledgements from any replicas: it must wait for every promotable one and
// every connected one, so that a connected replica that cannot be promoted (s_down, "fail")
// cannot stand in for a promotable one that is not connected.
TEST(ClusterTopologyTest, WaitCountsThePromotableAndTheConnectedReplicasOnce) {
  using V = std::vector<std::string>;
  EXPECT_EQ(replicas_to_wait_for(V{"a:1", "b:2"}, V{"a:1", "b:2"}), 2u);
  EXPECT_EQ(replicas_to_wait_for(V{"a:1"}, V{"s:3"}), 2u) << "the s_down stand-in";
  EXPECT_EQ(replicas_to_wait_for(V{"a:1", "b:2"}, V{"a:1"}), 2u);
  EXPECT_EQ(replicas_to_wait_for(V{}, V{"s:3"}), 1u);
  EXPECT_EQ(replicas_to_wait_for(V{"a:1"}, V{}), 1u);
  EXPECT_EQ(replicas_to_wait_for(V{}, V{}), 0u);
}

TEST(ServerIdentityTest, AMastersIdentityIsItsRunIdAndReplicationId) {
  const std::string info =
      "# Server\r\nrun_id:aaa\r\nuptime_in_seconds:12\r\n# Replication\r\nrole:master\r\n"
      "master_replid:bbb\r\nmaster_replid2:000\r\n";
  EXPECT_EQ(info_field(info, "uptime_in_seconds"), "12");
  EXPECT_EQ(info_field(info, "master_replid"), "bbb");
  EXPECT_EQ(info_field(info, "replid"), "") << "whole field names only";
  EXPECT_EQ(master_identity(info), "aaa/bbb");
  std::string replica = info;
  replica.replace(replica.find("role:master"), 11, "role:slave");
  EXPECT_EQ(master_identity(replica), "") << "a replica is no master";
}

TEST(ServerIdentityTest, TheNodesIdentityChangesWithAnyPartAndNotWithTheirOrder) {
  const auto ab = identity_reply({"a/1", "b/1"});
  EXPECT_EQ(ab.str, identity_reply({"b/1", "a/1"}).str);
  EXPECT_NE(ab.str, identity_reply({"a/1", "b/2"}).str) << "a promoted replica";
  EXPECT_NE(ab.str, identity_reply({"a/1"}).str);
  EXPECT_EQ(info_field(ab.str, "uptime_in_seconds"), "0");
  EXPECT_EQ(info_field(ab.str, "run_id").size(), 40u);
}

}  // namespace
}  // namespace dlock::node

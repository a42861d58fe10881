// SPDX-License-Identifier: MIT
// Issue 28: safety on the Redis that people run, on real servers: a failover behind one
// address, a URL that names a replica, a server that may evict keys. Each test failed on
// c2b01e5 (two holders, or a lock granted by a server that must not vote).
#include <dlock/dlock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "scripts/script.h"
#include "support/lock_clients.h"
#include "support/redis_server.h"
#include "support/replication.h"
#include "support/tcp_proxy.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::RedisServer;
using test::ServerOptions;

using test::client_of;
using test::fixed;
using test::in_sync;
using test::info_field;
using test::quick_master;
using test::replica_of;

// Item 1: the first of 3 URLs is an address that forwards to master A (keepalived, a load
// balancer, a managed endpoint). A's replica has run longer than the ttl and missed the grant;
// the address then forwards to the promoted replica. The replica's run_id is new to the other
// nodes, but its uptime is long: judged by uptime it booted long ago, and it voted at once.
TEST(Issue28FailoverTest, APromotedReplicaBehindTheSameAddressIsARestart) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer a(quick_master());
  RedisServer replica(replica_of(a));
  RedisServer b;
  RedisServer c;
  test::TcpProxy address("127.0.0.1", a.port());
  const std::string address_url = "redis://127.0.0.1:" + std::to_string(address.port());
  const std::vector<std::string> urls{address_url, b.url(), c.url()};
  constexpr auto kTtl = 3s;
  ASSERT_TRUE(eventually([&] { return in_sync(replica); }));

  Client holder_client = client_of(urls);
  ASSERT_TRUE(holder_client.try_lock("warm-up", fixed(kTtl, "w"))->unlock());  // greets
  // The replica has run longer than the ttl.
  ASSERT_TRUE(eventually(
      [&] { return std::stoll(info_field(replica, "server", "uptime_in_seconds")) >= 4; }, 10s));
  // Cut off before the grant (promoted early: it never sees the lock), and C is busy with
  // another library's short lock, so the grant is on A and B only.
  ASSERT_TRUE(replica.command({"REPLICAOF", "NO", "ONE"}));
  c.command({"SET", "job", "other-library", "PX", "300"});
  auto held = holder_client.try_lock("job", fixed(kTtl, "first"));
  ASSERT_TRUE(held) << held.error().message();
  ASSERT_TRUE(a.exists("job"));
  ASSERT_TRUE(b.exists("job"));
  ASSERT_FALSE(replica.exists("job"));

  // The failover: the address now reaches the promoted replica.
  address.retarget("127.0.0.1", replica.port());
  address.cut();
  ASSERT_TRUE(eventually([&] { return !c.exists("job"); }));

  Client second_client = client_of(urls);
  auto stolen = second_client.try_lock("job", fixed(kTtl, "second"));
  ASSERT_TRUE(held->is_held());
  EXPECT_FALSE(stolen) << "two holders: the promoted replica and C granted 'job' while "
                          "'first' holds it on B";
  if (!stolen) {
    EXPECT_NE(stolen.error().message().find("restarted recently"), std::string::npos)
        << stolen.error().message();
  }
  // The holder's own client sees the new server too once it reconnects.
  auto again = holder_client.try_lock("job", fixed(kTtl, "third"));
  EXPECT_FALSE(again) << "two holders through the holder's own client";
}

// The sibling of ClusterFailoverTest.ALossyFailoverOfTheHomeMasterLosingANewTtl behind one
// address (a managed endpoint), as a lone node: master A holds the lock's key and every record
// of its ttl, and the ttl (20 s) is new to it. Its replica, in sync with the greetings' records,
// is cut off before the grant (promoted early: it never sees it), and the address then moves to
// it. Its new replication id makes it a restart, but it knows only the 1 s ttls, so its
// quarantine lasts the contender's 1 s, and the contender gets the lock beside the holder.
// A KNOWN LIMIT, disabled (docs/safety.md, "What a failover can still hide"): a cluster or
// sentinel node confirms such a record on the replicas the topology names before the grant
// counts; a plain address shows only the replicas connected to the master (this one was cut
// off first), and its rounds run on the caller's thread. The replica guard covers it. The
// promise it checks: refused clearly, or never held twice while valid.
TEST(Issue28FailoverTest, DISABLED_ALossyFailoverBehindOneAddressLosingANewTtl) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer a(quick_master());
  RedisServer replica(replica_of(a));
  test::TcpProxy address("127.0.0.1", a.port());
  const std::vector<std::string> urls{"redis://127.0.0.1:" + std::to_string(address.port())};
  ASSERT_TRUE(eventually([&] { return in_sync(replica); }));
  Client holder_client = client_of(urls);
  Client other_client = client_of(urls);
  ASSERT_TRUE(holder_client.try_lock("warm-up", fixed(1s, "w"))->unlock());
  ASSERT_TRUE(other_client.try_lock("warm-up-b", fixed(1s, "w"))->unlock());
  ASSERT_TRUE(eventually([&] {
    return info_field(a, "replication", "master_repl_offset") ==
           info_field(replica, "replication", "slave_repl_offset");
  }));
  ASSERT_TRUE(replica.command({"REPLICAOF", "NO", "ONE"}));
  auto held = holder_client.try_lock("job", fixed(20s, "first"));
  if (!held) {
    EXPECT_NE(held.error().message().find("confirmed the record of a new ttl"), std::string::npos)
        << held.error().message();
    EXPECT_FALSE(a.exists("job")) << "the refused attempt left its key behind";
    return;
  }
  ASSERT_FALSE(replica.exists("job"));
  address.retarget("127.0.0.1", replica.port());
  address.cut();
  const auto limit = std::chrono::steady_clock::now() + 60s;
  while (held->validity() > 0ms) {
    ASSERT_LT(std::chrono::steady_clock::now(), limit);
    auto stolen = other_client.try_lock("job", fixed(1s, "second"));
    ASSERT_FALSE(stolen && held->validity() > 0ms)
        << "two holders: the promoted replica's quarantine ended before the lease it lost; "
        << held->validity().count() << " ms of validity left";
    std::this_thread::sleep_for(200ms);
  }
}

// Found by review (issue 28): a failback behind one address. The address moves from server S1
// to a standby S2 (its own data, not a replica), a lease is granted on S2 and B, and the address
// moves back to S1, which kept running and never had the lease's key. S1's run_id is known to
// every member, so it votes at once, and S1 and C grant the same name again. Open, as
// SimDirected.DISABLED_AFailbackToAServerThatMissedGrantsVotesAtOnce says (docs/safety.md).
TEST(Issue28FailoverTest, DISABLED_AFailbackToAServerThatKeptRunningIsARestart) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer s1;
  RedisServer s2;
  RedisServer b;
  RedisServer c;
  test::TcpProxy address("127.0.0.1", s1.port());
  const std::vector<std::string> urls{"redis://127.0.0.1:" + std::to_string(address.port()),
                                      b.url(), c.url()};
  Client first_client = client_of(urls);
  ASSERT_TRUE(first_client.try_lock("warm-up", fixed(300ms, "w"))->unlock());  // all members
  std::this_thread::sleep_for(20ms);

  address.retarget("127.0.0.1", s2.port());  // to the standby
  address.cut();
  Client holder_client = client_of(urls);
  // C is busy with another library's lock: the grant must come from S2 (once its quarantine
  // has passed) and B.
  c.command({"SET", "job", "other-library"});
  Result<Lease> held = Error(errc::lock_held, "");
  ASSERT_TRUE(eventually(
      [&] {
        held = holder_client.try_lock("job", fixed(4s, "first"));
        return held.has_value();
      },
      10s))
      << held.error().message();
  ASSERT_TRUE(s2.exists("job"));
  ASSERT_TRUE(b.exists("job"));

  address.retarget("127.0.0.1", s1.port());  // back to S1, which has no key of 'job'
  address.cut();
  c.command({"DEL", "job"});
  Client second_client = client_of(urls);
  auto stolen = second_client.try_lock("job", fixed(4s, "second"));
  ASSERT_TRUE(held->is_held());
  EXPECT_FALSE(stolen) << "two holders: S1 and C granted 'job' while 'first' holds it on B";
  if (!stolen) {
    EXPECT_NE(stolen.error().message().find("restarted recently"), std::string::npos)
        << stolen.error().message();
  }
  auto again = first_client.try_lock("job", fixed(4s, "third"));
  EXPECT_FALSE(again) << "two holders through the first client";
}

// Item 1: a server that answers role:slave never votes, even one that accepts writes.
TEST(Issue28FailoverTest, AReplicaNeverVotesEvenIfItAcceptsWrites) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer master(quick_master());
  RedisServer replica(replica_of(master, {"--replica-read-only", "no"}));
  ASSERT_TRUE(eventually([&] { return in_sync(replica); }));
  Client client = client_of({replica.url()});
  auto lease = client.try_lock("job", fixed(2s, "x"));
  ASSERT_FALSE(lease) << "a replica granted a lock its master never saw";
  EXPECT_EQ(lease.error().code(), make_error_code(errc::quorum_not_reached));
  EXPECT_NE(lease.error().message().find("replica (role:slave)"), std::string::npos)
      << lease.error().message();
  EXPECT_FALSE(replica.exists("job"));
}

ServerOptions evicting(const std::string& policy, const std::string& limit = "8mb") {
  ServerOptions o;
  o.extra_args = {"--maxmemory", limit, "--maxmemory-policy", policy};
  return o;
}

// Item 2: a lock held on a server that evicts keys with a ttl is dropped under memory pressure
// and granted again. Such a server does not vote; the error names its policy and the fix.
TEST(Issue28EvictionTest, AServerThatMayEvictLockKeysDoesNotVote) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  for (const std::string policy : {"volatile-lru", "allkeys-lru", "volatile-ttl"}) {
    RedisServer server(evicting(policy));
    Client client = client_of({server.url()});
    auto lease = client.try_lock("job", fixed(2s, "x"));
    ASSERT_FALSE(lease) << policy << ": granted on a server that may evict it";
    EXPECT_EQ(lease.error().code(), make_error_code(errc::quorum_not_reached));
    const std::string message = lease.error().message();
    EXPECT_NE(message.find("maxmemory-policy " + policy), std::string::npos) << message;
    EXPECT_NE(message.find("noeviction"), std::string::npos) << message;
  }
}

TEST(Issue28EvictionTest, NoevictionOrNoLimitVotes) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer noeviction(evicting("noeviction"));
  RedisServer unlimited(evicting("volatile-lru", "0"));
  for (RedisServer* server : {&noeviction, &unlimited}) {
    Client client = client_of({server->url()});
    auto lease = client.try_lock("job", fixed(2s, "x"));
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_TRUE(lease->unlock());
  }
}

// The opt-out, and what it risks: with allow_eviction the server votes, and eviction under
// memory pressure really frees a held lock (the reason the default refuses).
TEST(Issue28EvictionTest, AllowEvictionVotesAndEvictionReallyFreesAHeldLock) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(evicting("volatile-ttl", "4mb"));
  ClientOptions options;
  options.nodes = {server.url()};
  options.node_timeout = 500ms;
  options.allow_eviction = true;
  Client client = test::client_from(options);
  auto lease = client.try_lock("job", fixed(30s, "x"));
  ASSERT_TRUE(lease) << lease.error().message();
  // Other keys with longer ttls fill memory: volatile-ttl evicts the shortest ttl first.
  const std::string value(64 * 1024, 'v');
  for (int i = 0; i < 200 && server.exists("job"); ++i) {
    server.command({"SET", "filler:" + std::to_string(i), value, "EX", "3600"});
  }
  EXPECT_FALSE(server.exists("job")) << "memory filled without evicting the lock";
  EXPECT_NE(info_field(server, "stats", "evicted_keys"), "0");
}

// Item 2: evictions are seen. Status (library and `dlock status --json`) gives each node's
// evicted_keys and why a node never votes; the Prometheus exporter has both as gauges.
TEST(Issue28EvictionTest, StatusAndMetricsShowEvictionsAndNodesThatNeverVote) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(evicting("volatile-ttl", "4mb"));
  const std::string value(64 * 1024, 'v');
  for (int i = 0; i < 200; ++i) {
    server.command({"SET", "filler:" + std::to_string(i), value, "EX", std::to_string(100 + i)});
  }
  ASSERT_NE(info_field(server, "stats", "evicted_keys"), "0");

  Client strict = client_of({server.url()});
  auto status = strict.status("job");
  ASSERT_TRUE(status) << status.error().message();
  ASSERT_TRUE(status->nodes[0].evicted_keys);
  EXPECT_GT(*status->nodes[0].evicted_keys, 0u);
  EXPECT_NE(status->nodes[0].never_votes.find("maxmemory-policy volatile-ttl"), std::string::npos)
      << status->nodes[0].never_votes;

  auto metrics = std::make_shared<PrometheusObserver>();
  ClientOptions options;
  options.nodes = {server.url()};
  options.allow_eviction = true;
  options.observer = metrics;
  Client allowed = std::move(Client::create(options)).value();
  ASSERT_TRUE(allowed.try_lock("job", fixed(1s, "x")));  // greets: reads INFO
  EXPECT_TRUE(allowed.status("job")->nodes[0].never_votes.empty()) << "allowed to vote";
  const std::string text = metrics->text();
  EXPECT_NE(text.find("dlock_node_evicted_keys{node=\"" + server.url() + "\"} "), std::string::npos)
      << text;
  EXPECT_EQ(text.find("dlock_node_evicted_keys{node=\"" + server.url() + "\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("dlock_node_never_votes{node=\"" + server.url() + "\"} 0"), std::string::npos)
      << text;

  FILE* p = popen(
      (std::string(DLOCK_TOOL_PATH) + " status --json -r " + server.url() + " job").c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  EXPECT_NE(out.find("\"evicted_keys\":"), std::string::npos) << out;
  EXPECT_NE(out.find("\"never_votes\":"), std::string::npos) << out;
}

// Item 2 through the CLI: `dlock run` on an evicting node refuses to start the command (no
// quorum, exit 69) and names the policy; --allow-eviction runs it.
TEST(Issue28EvictionTest, DlockRunRefusesAnEvictingNodeUnlessAllowed) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(evicting("volatile-lru"));
  auto run = [&](const std::string& flags) {
    const std::string cmd = std::string(DLOCK_TOOL_PATH) + " run -r " + server.url() + " " + flags +
                            " -t 2s job -- echo ran 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = pclose(p);
    return std::make_pair(WEXITSTATUS(status), out);
  };
  const auto [refused, refused_out] = run("");
  EXPECT_EQ(refused, 69) << refused_out;
  EXPECT_NE(refused_out.find("maxmemory-policy volatile-lru"), std::string::npos) << refused_out;
  EXPECT_EQ(refused_out.find("ran"), std::string::npos) << refused_out;
  const auto [allowed, allowed_out] = run("--allow-eviction");
  EXPECT_EQ(allowed, 0) << allowed_out;
  EXPECT_NE(allowed_out.find("ran"), std::string::npos) << allowed_out;
}

// Node 1 of `nodes` restarts empty, and its vote is needed for `name`: node 2 refuses it
// (another library's lock) but vouches. How long a new client then took to get `name` for
// 300 ms as `owner`, trying for up to `limit`; nothing (a failure added) if it never did.
std::optional<std::chrono::steady_clock::duration> lock_after_a_restart(
    test::RedisCluster& nodes, const std::string& name, const std::string& owner,
    std::chrono::milliseconds limit) {
  nodes[1].restart(/*keep_data=*/false);
  nodes[2].command({"SET", name, "other-library", "PX", "60000"});
  Client later = client_of(nodes.urls());
  Result<Lease> lease = Error(errc::lock_held, "not tried");
  const auto start = std::chrono::steady_clock::now();
  if (!eventually(
          [&] {
            lease = later.try_lock(name, fixed(300ms, owner));
            return lease.has_value();
          },
          limit)) {
    ADD_FAILURE() << lease.error().message();
    return std::nullopt;
  }
  return std::chrono::steady_clock::now() - start;
}

// Item 4: the largest ttl ever used was remembered forever, so a node that restarted was kept
// out for it long after every lease of that ttl had ended. Now the record follows the leases
// that may still live: one released 1.5 s lease, its ttl long past, keeps nobody out.
TEST(Issue28TtlRecordTest, ARestartIsNotQuarantinedForATtlNoLeaseStillHas) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster nodes(3);
  Client client = client_of(nodes.urls());
  ASSERT_TRUE(client.try_lock("long", fixed(1500ms, "a"))->unlock());
  ASSERT_TRUE(client.try_lock("short", fixed(300ms, "a"))->unlock());
  // No lease of 1.5 s can live now (an announcement's entry lasts two ttls: 3 s).
  std::this_thread::sleep_for(3200ms);
  // Quarantined, if at all, for the new client's own 300 ms, not for 1.5 s.
  const auto took = lock_after_a_restart(nodes, "job", "b", 5s);
  ASSERT_TRUE(took);
  EXPECT_LT(*took, 1100ms) << "kept out for a ttl that no live lease has";
}

// Item 4, the other side: a lease renewed long past its grant keeps its ttl recorded, so a node
// that restarts while it lives is still kept out (the record's end follows the renewals).
TEST(Issue28TtlRecordTest, ARenewedLeaseKeepsARestartedNodeOut) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster nodes(3);
  Client holder_client = client_of(nodes.urls());
  // Another library's lock on node 2: the holder's lease lives on nodes 0 and 1 only. Deleted
  // once the holder was refused there, not left to expire: a 300 ms one ended before a slow
  // first acquisition (a busy machine) reached node 2, which then granted too.
  nodes[2].command({"SET", "job", "other-library", "PX", "30000"});
  LockOptions renewed = fixed(1500ms, "holder");
  renewed.auto_renew = true;
  auto held = holder_client.try_lock("job", renewed);
  ASSERT_TRUE(held) << held.error().message();
  ASSERT_EQ(nodes[2].command({"GET", "job"})->str, std::string("other-library"));
  nodes[2].command({"DEL", "job"});
  std::this_thread::sleep_for(2500ms);  // several renewals: the grant's record alone has ended
  ASSERT_TRUE(held->is_held());
  ASSERT_FALSE(nodes[2].exists("job"));
  nodes[1].restart(/*keep_data=*/false);
  Client second = client_of(nodes.urls());
  auto stolen = second.try_lock("job", fixed(1500ms, "second"));
  EXPECT_FALSE(stolen) << "two holders: the restarted node 1 and node 2 granted 'job'";
}

// Item 4, found again by the review's fix: a greeting announced the largest ttl the client
// had ever announced (or learned), so a long-lived client that once used 1 s announced it again
// at every greeting, and the record, and with it every quarantine, never ended while the client
// ran. A greeting now announces only the ttl of the call that made it.
TEST(Issue28TtlRecordTest, ALongLivedClientStopsAnnouncingATtlItNoLongerUses) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster nodes(3);
  Client client = client_of(nodes.urls());
  ASSERT_TRUE(client.try_lock("long", fixed(1000ms, "a"))->unlock());
  // Short leases for 4 s: the client greets again whenever its announcement would lapse.
  const auto until = std::chrono::steady_clock::now() + 4s;
  while (std::chrono::steady_clock::now() < until) {
    auto lease = client.try_lock("short", fixed(200ms, "a"));
    ASSERT_TRUE(lease) << lease.error().message();
    ASSERT_TRUE(lease->unlock());
    std::this_thread::sleep_for(50ms);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto time = nodes[i].command({"TIME"});
    const auto score = nodes[i].command({"ZSCORE", "dlock:max-ttl", "1000"});
    ASSERT_TRUE(time && score);
    const long long now_ms =
        std::stoll(time->element[0]->str) * 1000 + std::stoll(time->element[1]->str) / 1000;
    if (score->type == REDIS_REPLY_NIL) continue;
    EXPECT_LE(std::stoll(score->str), now_ms)
        << "node " << i << " still records 1 s, 3 s after its last lease ended";
  }
}

// Item 5: a quiet rolling restart without persistence (one node at a time, each after the ttl
// has passed) erased every copy of a name's token, and the next token started again from 1. A
// node without a fence floor now counts from its clock in microseconds.
TEST(Issue28FencingTest, TokensKeepGrowingAcrossAQuietRollingRestart) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster nodes(3);
  Client client = client_of(nodes.urls());
  FencingToken last;
  for (int i = 0; i < 5; ++i) {
    auto lease = client.lock("job", 10s, fixed(400ms, "a"));
    ASSERT_TRUE(lease) << lease.error().message();
    last = lease->fencing_token();
    ASSERT_TRUE(lease->unlock());
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    std::this_thread::sleep_for(600ms);  // quiet: longer than the ttl
    nodes[i].restart(/*keep_data=*/false);
  }
  std::this_thread::sleep_for(600ms);
  Client later = client_of(nodes.urls());
  auto lease = later.lock("job", 10s, fixed(400ms, "b"));
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_GT(lease->fencing_token(), last) << "a token went down after every node restarted";
}

namespace {

// The value of `key` on `server` as an integer (0: absent).
std::uint64_t counter_on(const RedisServer& server, const std::string& key) {
  auto r = server.command({"GET", key});
  if (!r || r->type != REDIS_REPLY_STRING) return 0;
  return std::stoull(std::string(r->str, r->len));
}

}  // namespace

// Item 5, "every granting node below the token raised": node 2 missed three grants of 'job' (it
// neither heard nor answered), so its counter fell behind. When it granted again beside the
// other two, the token was already on a quorum and nothing raised node 2: it stayed behind for
// as long as the name was in use, one more failure away from a repeated token.
TEST(Issue28FencingTest, AGrantingNodeBelowTheTokenIsRaised) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster nodes(3);
  test::TcpProxy to_node2("127.0.0.1", nodes[2].port());
  Client client = client_of(
      {nodes[0].url(), nodes[1].url(), "redis://127.0.0.1:" + std::to_string(to_node2.port())});
  const auto take = [&] {
    auto lease = client.try_lock("job", fixed(10s, "a"));
    if (!lease) {
      ADD_FAILURE() << lease.error().message();
      return FencingToken();
    }
    const FencingToken token = lease->fencing_token();
    EXPECT_TRUE(lease->unlock());
    return token;
  };
  ASSERT_NE(take(), FencingToken());
  to_node2.blackhole();
  for (int i = 0; i < 3; ++i) ASSERT_NE(take(), FencingToken());
  // Each node counts with its own counter (the fence floor, one INCR per grant).
  ASSERT_LT(counter_on(nodes[2], "dlock:fence-floor"), counter_on(nodes[0], "dlock:fence-floor"));
  to_node2.cut();  // the partition outlasts TCP: the connection breaks, the client reconnects
  to_node2.forward();
  // Node 2 grants again once its connection is back: its counter is then the token handed out.
  bool raised = false;
  for (int i = 0; i < 30 && !raised; ++i) {
    const FencingToken token = take();
    raised = token != FencingToken() &&
             eventually([&] { return counter_on(nodes[2], "dlock:fence-floor") == token.value(); },
                        500ms);
  }
  EXPECT_TRUE(raised) << "node 2's counter stayed behind the tokens handed out";
  // The reconnection's greeting may have raised node 2's floor already (Membership raises the
  // floors below the largest it hears of). A node also falls behind on a connection that stays
  // up: grants of other names by other clients that it did not get (emulated by hand on nodes 0
  // and 1). The next grant's token is then on a quorum, node 2 grants below it, and is raised.
  const std::uint64_t ahead = counter_on(nodes[0], "dlock:fence-floor") + 10;
  for (std::size_t i : {0u, 1u}) {
    ASSERT_TRUE(nodes[i].command({"SET", "dlock:fence-floor", std::to_string(ahead)}));
  }
  const FencingToken token = take();
  ASSERT_EQ(token.value(), ahead + 1);
  EXPECT_TRUE(
      eventually([&] { return counter_on(nodes[2], "dlock:fence-floor") == token.value(); }, 2s))
      << "node 2 granted below the token and stayed behind it";
  EXPECT_EQ(counter_on(nodes[2], "dlock:fence:{job}"), 0u)
      << "the raise wrote a name counter that node 2 did not have";
}

// Item 5, "floors re-seeded from a quorum at each greeting": a node that restarts from an old
// snapshot (an RDB file, the default persistence, or a backup) comes back with the fence floor
// of that moment. Nodes restarted so one at a time, with no grant in between (the name was
// quiet, and the only other name was held by another program), took a name's token back
// down: each kept its old floor. Now the greeting that follows a restart raises every floor
// below the largest a quorum reports.
TEST(Issue28FencingTest, AGreetingRaisesTheFloorOfANodeRestartedFromAnOldSnapshot) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster nodes(3);
  Client client = client_of(nodes.urls());
  auto first = client.try_lock("job", fixed(400ms, "a"));
  ASSERT_TRUE(first) << first.error().message();
  ASSERT_TRUE(first->unlock());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    // 'probe' is held by another program's SET NX lock (acquire.lua never touches it): every
    // attempt on it is refused, in the snapshot too.
    ASSERT_TRUE(nodes[i].command({"SET", "probe", "another-program"}));
    auto saved = nodes[i].command({"SAVE"});  // the snapshot the node will come back with
    ASSERT_TRUE(saved && saved->type == REDIS_REPLY_STATUS);
  }
  FencingToken last;
  for (int i = 0; i < 4; ++i) {
    auto lease = client.try_lock("job", fixed(400ms, "a"));
    ASSERT_TRUE(lease) << lease.error().message();
    last = lease->fencing_token();
    ASSERT_TRUE(lease->unlock());
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    std::this_thread::sleep_for(1500ms);  // the quarantine of the node before has passed
    nodes[i].restart(/*keep_data=*/true);
    ASSERT_LT(counter_on(nodes[i], "dlock:fence-floor"), last.value());
    // A refused attempt greets (the node's connection is new) and grants nothing.
    EXPECT_TRUE(eventually(
        [&] {
          auto refused = client.try_lock("probe", fixed(400ms, "a"));
          EXPECT_FALSE(refused) << "two holders of 'probe'";
          return counter_on(nodes[i], "dlock:fence-floor") >= last.value();
        },
        5s))
        << "node " << i << " kept the floor of its snapshot";
  }
  std::this_thread::sleep_for(1500ms);
  auto lease = client.lock("job", 10s, fixed(400ms, "a"));
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_GT(lease->fencing_token(), last) << "a token went down after restarts from snapshots";
}

// Item 9: the margin that keeps an isolated Sentinel-managed master from confirming renewals
// after a replica was promoted. With min-replicas-to-write 1 and min-replicas-max-lag L, the
// master refuses writes (NOREPLICAS) only once its replica's last ack is more than L whole
// seconds old, and it recounts its good replicas once a second (serverCron): after the replica
// goes silent it still accepts writes for L to L + 2 s. down-after-milliseconds must exceed that,
// plus the election, for the case to be closed: docs/safety.md. Measured here (printed), with a
// bound loose enough for a busy machine; the claim is the measurement's, not the bound's.
TEST(Issue28SentinelMarginTest,
     AMasterStopsWritesWithinTheLagPlusTwoSecondsOfItsReplicaGoingSilent) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer master(quick_master({"--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"}));
  RedisServer replica(replica_of(master));
  ASSERT_TRUE(eventually([&] { return in_sync(replica); }));
  ASSERT_TRUE(eventually([&] {
    auto r = master.command({"SET", "probe", "1"});
    return r && r->type == REDIS_REPLY_STATUS;
  }));
  replica.pause();  // silent: no more acks
  const auto silent = std::chrono::steady_clock::now();
  bool refused = false;
  while (!refused && std::chrono::steady_clock::now() - silent < 10s) {
    auto r = master.command({"SET", "probe", "2"});
    refused = r && r->type == REDIS_REPLY_ERROR && std::string(r->str).rfind("NOREPLICAS", 0) == 0;
    if (!refused) std::this_thread::sleep_for(20ms);
  }
  const auto took = std::chrono::steady_clock::now() - silent;
  replica.resume();
  ASSERT_TRUE(refused) << "the master kept accepting writes 10 s after its replica went silent";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  std::cout << "min-replicas-max-lag 1: writes accepted for " << ms
            << " ms after the replica went silent\n";
  EXPECT_GE(ms, 900) << "refused before the lag passed";
}

// Review of item 4: out of memory (noeviction), a script's first write is refused but DEL is
// not. max_ttl_raise.lua's fallback for an older dlock's string record deleted the whole record
// (a 60 s entry) before its own ZADD failed: the ttls of live leases were forgotten.
TEST(Issue28TtlRecordTest, OutOfMemoryTheRecordOfLiveTtlsIsKept) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  auto raise = [&](const std::string& ttl) {
    return server.command(
        {"EVAL", std::string(scripts::max_ttl_raise().source), "1", "dlock:max-ttl", ttl, ttl});
  };
  auto first = raise("60000");
  ASSERT_TRUE(first && first->type == REDIS_REPLY_INTEGER && first->integer == 60000);
  ASSERT_TRUE(server.command({"CONFIG", "SET", "maxmemory", "1"}));
  auto refused = raise("10000");
  ASSERT_TRUE(server.command({"CONFIG", "SET", "maxmemory", "0"}));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->type, REDIS_REPLY_ERROR);
  auto score = server.command({"ZSCORE", "dlock:max-ttl", "60000"});
  EXPECT_TRUE(score && score->type == REDIS_REPLY_STRING) << "the 60 s entry was deleted";
}

// ...and a renewal whose record could not be raised does not count: the lease would outlive
// what a greeting reads there after a restart. (An entry already recorded is raised on a full
// server too, since that takes no memory: ManagedOomTest. A ttl new to the record is not.)
TEST(Issue28TtlRecordTest, AnExtensionThatCannotRecordItsTtlDoesNotCount) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_of({server.url()});
  auto lease = client.try_lock("job", fixed(10s, "x"));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(server.command({"CONFIG", "SET", "maxmemory", "1"}));
  auto extended = lease->extend(20s);
  ASSERT_TRUE(server.command({"CONFIG", "SET", "maxmemory", "0"}));
  EXPECT_FALSE(extended) << "renewed on a node that could not record the ttl";
  if (!extended) {
    EXPECT_NE(extended.error().message().find("max_ttl_raise"), std::string::npos)
        << extended.error().message();
  }
}

// Item 4, scenario 4's remainder: a refused attempt still left its announcement, its ttl for
// twice that on every node, so a node that restarted meanwhile was kept out for the refused ttl.
// Now the client takes its announcement back once the attempt is refused and nothing else of it
// is in flight: the restarted node votes again after the ttl of the live leases (1 s here), not
// after the refused one's (60 s).
TEST(Issue28TtlRecordTest, ARefusedAttemptDoesNotKeepARestartedNodeOutForItsTtl) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster nodes(3);
  Client holder = client_of(nodes.urls());
  auto held = holder.try_lock("job", fixed(1000ms, "holder"));
  ASSERT_TRUE(held) << held.error().message();
  Client refused_client = client_of(nodes.urls());
  auto refused = refused_client.try_lock("job", fixed(60s, "other"));
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(errc::lock_held)) << refused.error().message();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto entries = nodes[i].command({"ZRANGE", "dlock:max-ttl", "0", "-1"});
    ASSERT_TRUE(entries && entries->type == REDIS_REPLY_ARRAY);
    for (std::size_t k = 0; k < entries->elements; ++k) {
      EXPECT_NE(std::string(entries->element[k]->str).rfind("60000", 0), 0u)
          << "node " << i << " still records the refused 60 s: " << entries->element[k]->str;
    }
  }
  ASSERT_TRUE(held->unlock());
  const auto took = lock_after_a_restart(nodes, "next", "later", 10s);
  ASSERT_TRUE(took);
  EXPECT_LT(*took, 3s) << "kept out for the refused attempt's ttl, not the live leases'";
}

// Scenario 4 with the CLI, as the issue tells it: `dlock acquire -t 168h` (the issue's 7d; the
// CLI has no day unit) is refused (the lock is held for 5 s); a node restarts empty; locking
// goes on within the live ttl, not a week later. (Held for 2 s, the lock was gone before the
// second process asked, with 32 tests at once on 2 cores.)
TEST(Issue28TtlRecordTest, CliARefusedSevenDayAcquireDoesNotStopLockingAfterARestart) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  test::RedisCluster nodes(3);
  std::string nodes_args;
  for (const auto& url : nodes.urls()) nodes_args += " -r " + url;
  auto run = [&](const std::string& args) {
    const std::string cmd = std::string(DLOCK_TOOL_PATH) + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = pclose(p);
    return std::make_pair(WEXITSTATUS(status), out);
  };
  const auto [held, held_out] = run("acquire" + nodes_args + " -t 5s job");
  ASSERT_EQ(held, 0) << held_out;
  const auto [refused, refused_out] = run("acquire" + nodes_args + " -t 168h job");
  ASSERT_EQ(refused, 75) << refused_out;
  nodes[1].restart(/*keep_data=*/false);
  nodes[2].command({"SET", "next", "other-library", "PX", "60000"});
  const auto start = std::chrono::steady_clock::now();
  const auto [ran, ran_out] = run("run" + nodes_args + " -t 1s -w 20s next -- echo ran");
  EXPECT_EQ(ran, 0) << ran_out;
  EXPECT_NE(ran_out.find("ran"), std::string::npos) << ran_out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s)
      << "node 1 was kept out for the refused 7 days, not the live 5 s";
}

std::string pre_retraction_script(const std::string& name) {
  std::ifstream in(std::string(DLOCK_PRE_RETRACTION_DIR) + "/" + name + ".lua");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Old and new clients on the same nodes. A new client's announcement is "ttl.<digits>": a dlock
// from before the retraction reads it with tonumber as a little over the ttl (its hello.lua and
// max_ttl_raise.lua answer the ttl, no error), and a new client's retraction never removes an
// old client's announcement (a bare ttl, shared by every client that recorded it).
TEST(Issue28TtlRecordTest, OldAndNewClientsReadEachOthersAnnouncements) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_of({server.url()});
  auto held = client.try_lock("job", fixed(5000ms, "holder"));  // greets: every boot recorded
  ASSERT_TRUE(held) << held.error().message();
  const std::string run_id = info_field(server, "server", "run_id");
  // A new client's announcement of 7 s, as hello.lua writes it.
  const auto time = server.command({"TIME"});
  ASSERT_TRUE(time);
  const long long now_ms =
      std::stoll(time->element[0]->str) * 1000 + std::stoll(time->element[1]->str) / 1000;
  ASSERT_TRUE(server.command(
      {"ZADD", "dlock:max-ttl", std::to_string(now_ms + 14000), "7000.123456789012345"}));
  // An old client's greeting announcing 1 s learns the new client's 7 s.
  auto old_greet = server.command({"EVAL", pre_retraction_script("hello"), "2", "dlock:boots",
                                   "dlock:max-ttl", "1000", "1", "greet", run_id, "10"});
  ASSERT_TRUE(old_greet);
  ASSERT_EQ(old_greet->type, REDIS_REPLY_ARRAY) << (old_greet->str ? old_greet->str : "");
  EXPECT_EQ(old_greet->element[0]->integer, 7000);
  auto old_raise = server.command(
      {"EVAL", pre_retraction_script("max_ttl_raise"), "1", "dlock:max-ttl", "2000", "2000"});
  ASSERT_TRUE(old_raise);
  ASSERT_EQ(old_raise->type, REDIS_REPLY_INTEGER) << (old_raise->str ? old_raise->str : "");
  EXPECT_EQ(old_raise->integer, 7000);
  // An old client's announcement of 9 s (bare) outlives a new client's refusal and retraction.
  auto old_announce = server.command({"EVAL", pre_retraction_script("hello"), "2", "dlock:boots",
                                      "dlock:max-ttl", "9000", "1", "greet", run_id, "10"});
  ASSERT_TRUE(old_announce && old_announce->type == REDIS_REPLY_ARRAY);
  Client other = client_of({server.url()});
  ASSERT_FALSE(other.try_lock("job", fixed(8000ms, "other")));
  auto kept = server.command({"ZSCORE", "dlock:max-ttl", "9000"});
  EXPECT_TRUE(kept && kept->type == REDIS_REPLY_STRING)
      << "an old client's announcement was removed";
  auto entries = server.command({"ZRANGE", "dlock:max-ttl", "0", "-1"});
  ASSERT_TRUE(entries && entries->type == REDIS_REPLY_ARRAY);
  for (std::size_t k = 0; k < entries->elements; ++k) {
    EXPECT_NE(std::string(entries->element[k]->str).rfind("8000.", 0), 0u)
        << "the refused client's own announcement stayed: " << entries->element[k]->str;
  }
  // And a new client's greeting reads the old bare 9 s.
  auto new_greet =
      server.command({"EVAL", std::string(scripts::hello().source), "3", "dlock:boots",
                      "dlock:max-ttl", "dlock:fence-floor", "0", "1", "greet", run_id, "10"});
  ASSERT_TRUE(new_greet && new_greet->type == REDIS_REPLY_ARRAY);
  EXPECT_EQ(new_greet->element[0]->integer, 9000);
}

}  // namespace
}  // namespace dlock

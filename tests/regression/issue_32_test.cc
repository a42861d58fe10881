// SPDX-License-Identifier: MIT
// Issue 32 (a lean protocol): what the cheaper scripts changed, on a real redis-server. A grant
// whose ttl dlock:max-ttl already records long enough writes nothing there, and a grant that
// records it does so for two ttls, so the grants meanwhile skip it; the record must still reach
// past every lease that may live, also when something took it away (an eviction, an operator's
// DEL) or made it again without this ttl.
// acquire.lua counts tokens with the node's counter (one INCR per grant, on any number of nodes): a
// token must still be larger than every token of the name before it, whichever client, mode or
// dlock version handed it out.
#include <dlock/async.h>
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lock/calls.h"
#include "lock/hold.h"
#include "node/call.h"
#include "support/redis_server.h"
#include "support/tcp_proxy.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

// With the library's node timeout unless one is given (some tests measure what it bounds).
Client client_on(const RedisServer& server,
                 std::optional<std::chrono::milliseconds> node_timeout = std::nullopt) {
  ClientOptions options;
  options.nodes = {server.url()};
  if (node_timeout) options.node_timeout = *node_timeout;
  auto c = Client::create(options);
  EXPECT_TRUE(c) << c.error().message();
  return std::move(c).value();
}

LockOptions ttl_of(std::chrono::milliseconds ttl) {
  LockOptions o;
  o.ttl = ttl;
  o.auto_renew = false;
  return o;
}

// The server's clock in ms (the clock the record's ends are on).
long long server_ms(const RedisServer& server) {
  const auto t = server.command({"TIME"});
  return std::stoll(t->element[0]->str) * 1000 + std::stoll(t->element[1]->str) / 1000;
}

// When dlock:max-ttl's entry of `ttl` ends (ms, the server's clock), or -1 if it has none.
long long record_end(const RedisServer& server, const std::string& ttl) {
  const auto score = server.command({"ZSCORE", "dlock:max-ttl", ttl});
  if (!score || score->type != REDIS_REPLY_STRING) return -1;
  return std::stoll(score->str);
}

// How many writes the server counted (INFO persistence: no save runs in tests, so the count
// only grows): a command that changed nothing counts none.
long long writes_of(const RedisServer& server) {
  const auto info = server.command({"INFO", "persistence"});
  const std::string text = info->str;
  const std::string key = "rdb_changes_since_last_save:";
  return std::stoll(text.substr(text.find(key) + key.size()));
}

// How long (ms) dlock:max-ttl itself has left: -1 none (it would outlive every entry).
long long record_key_left(const RedisServer& server) {
  return server.command({"PTTL", "dlock:max-ttl"})->integer;
}

void lock_and_unlock(Client& client, const std::string& name, std::chrono::milliseconds ttl) {
  auto lease = client.try_lock(name, ttl_of(ttl));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->unlock());
}

// Every grant recorded its ttl before: a ZADD per lock. Now one per ttl's time and node, and
// the record reaches past every lease granted meanwhile.
TEST(Issue32RecordTest, GrantsOfOneTtlRecordItOncePerTtl) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server);
  lock_and_unlock(client, "warm-up", 60s);
  const long long recorded = record_end(server, "60000");
  const long long writes = writes_of(server);
  ASSERT_TRUE(server.command({"CONFIG", "RESETSTAT"}));
  for (int i = 0; i < 20; ++i) lock_and_unlock(client, "job-" + std::to_string(i), 60s);
  EXPECT_EQ(server.calls_of("zadd"), 0) << "a grant recorded a ttl its record already covers";
  // No write is counted but the lock's own (SET, the node counter's INCR, DEL).
  EXPECT_EQ(writes_of(server) - writes, 20 * 3) << "a grant wrote more than its lock";
  EXPECT_EQ(record_end(server, "60000"), recorded)
      << "a grant recorded a ttl its record already covers";
  // The last grant's lease ends within 60 s of now; its record at least that late.
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000);
  // Another ttl is recorded at once: the marker names one ttl.
  lock_and_unlock(client, "other", 90s);
  EXPECT_GE(record_end(server, "90000"), server_ms(server) + 90000);
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000 - 5000);
}

// A policy that evicts keys with a ttl may take dlock:max-ttl. A grant that checks the record
// then records again (a node that restarts later must know the lease's ttl to quarantine itself
// long enough). A client that saw a grant on its connection checks again only after half a ttl
// (Issue32RecordWindowTest), so each grant after a change by hand comes from a new client here.
TEST(Issue32RecordTest, ARecordTakenAwayIsWrittenAgain) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  {
    Client client = client_on(server);
    lock_and_unlock(client, "first", 60s);
  }
  ASSERT_GE(record_end(server, "60000"), 0);
  // What an eviction does.
  ASSERT_TRUE(server.command({"DEL", "dlock:max-ttl"}));
  Client client = client_on(server);
  auto held = client.try_lock("second", ttl_of(60s));
  ASSERT_TRUE(held) << held.error().message();
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000 - 1000)
      << "a grant whose record was gone recorded nothing";
  ASSERT_TRUE(held->unlock());
  // The record evicted and made again by something else (a renewal round's record of another
  // ttl): the key exists, the entry of this ttl does not.
  ASSERT_TRUE(server.command({"DEL", "dlock:max-ttl"}));
  ASSERT_TRUE(server.command(
      {"ZADD", "dlock:max-ttl", std::to_string(server_ms(server) + 30000), "15000"}));
  Client third = client_on(server);
  lock_and_unlock(third, "third", 60s);
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000 - 1000)
      << "a grant recorded nothing in a record without its ttl";
  // The entry there, but ending too soon for a new lease (a record written by a renewal round's
  // shorter reach, or one whose end has come close): recorded again.
  ASSERT_TRUE(server.command(
      {"ZADD", "dlock:max-ttl", std::to_string(server_ms(server) + 20000), "60000"}));
  Client fourth = client_on(server);
  lock_and_unlock(fourth, "fourth", 60s);
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000 - 1000)
      << "a grant trusted an entry that ends before its lease";
}

// The same on a lock set of several nodes.
TEST(Issue32RecordTest, GrantsOfALockSetOfSeveralNodesRecordTheirTtlOncePerTtl) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  std::vector<std::unique_ptr<RedisServer>> servers;
  ClientOptions options;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<RedisServer>());
    options.nodes.push_back(servers.back()->url());
  }
  auto client = Client::create(options);
  ASSERT_TRUE(client) << client.error().message();
  lock_and_unlock(*client, "warm-up", 60s);
  std::vector<long long> recorded;
  for (const auto& server : servers) {
    recorded.push_back(record_end(*server, "60000"));
    EXPECT_GE(recorded.back(), server_ms(*server) + 120000 - 5000);
    EXPECT_GE(record_key_left(*server), 120000 - 5000);
  }
  for (const auto& server : servers) ASSERT_TRUE(server->command({"CONFIG", "RESETSTAT"}));
  for (int i = 0; i < 20; ++i) lock_and_unlock(*client, "job-" + std::to_string(i), 60s);
  for (std::size_t i = 0; i < servers.size(); ++i) {
    EXPECT_EQ(record_end(*servers[i], "60000"), recorded[i])
        << "a grant recorded a ttl its record already covers";
    EXPECT_EQ(servers[i]->calls_of("zadd"), 0);
  }
  // An entry that ends too soon is raised for two ttls (by a grant that checks it: a new client's).
  ASSERT_TRUE(servers[0]->command(
      {"ZADD", "dlock:max-ttl", std::to_string(server_ms(*servers[0]) + 20000), "60000"}));
  auto again = Client::create(options);
  ASSERT_TRUE(again) << again.error().message();
  lock_and_unlock(*again, "again", 60s);
  EXPECT_GE(record_end(*servers[0], "60000"), server_ms(*servers[0]) + 120000 - 5000);
}

// A grant that writes its ttl's entry writes it for two ttls (so the grants of the next half ttl
// skip it) and gives dlock:max-ttl a ttl that outlives it, also when the fast path (which tests
// the entry against the key's PEXPIRETIME) found it missing or ending too soon. Each grant
// after a change by hand is a new client's, which checks the record (ARecordTakenAwayIs...).
TEST(Issue32RecordTest, AGrantThatRecordsRecordsForTwoTtlsAndTheRecordExpires) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server);
  lock_and_unlock(client, "first", 60s);
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 120000 - 5000);
  EXPECT_GE(record_key_left(server), 120000 - 5000);
  // The key taken away (an eviction): made again, with a ttl.
  ASSERT_TRUE(server.command({"DEL", "dlock:max-ttl"}));
  Client second = client_on(server);
  lock_and_unlock(second, "second", 60s);
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 120000 - 5000)
      << "the record was written for one lease only";
  EXPECT_GE(record_key_left(server), 120000 - 5000) << "dlock:max-ttl was left without a ttl";
  // The entry there but ending before a new lease would, the key with a short ttl.
  ASSERT_TRUE(server.command(
      {"ZADD", "dlock:max-ttl", std::to_string(server_ms(server) + 20000), "60000"}));
  ASSERT_TRUE(server.command({"PEXPIRE", "dlock:max-ttl", "20000"}));
  Client third = client_on(server);
  lock_and_unlock(third, "third", 60s);
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 120000 - 5000)
      << "an entry that ended too soon was raised for one lease only";
  EXPECT_GE(record_key_left(server), 120000 - 5000)
      << "dlock:max-ttl would expire before the entry it keeps";
}

// A client that saw a grant on its connection knows the record reaches at least 1.5 ttls past
// that grant's run (node/record_window.h): the grants of the next half ttl skip the record's
// check (a ZSCORE and a PEXPIRETIME less per grant, about a tenth of a cycle's Redis CPU), and
// the record still reaches past every lease they grant. Before, every grant checked it. Both
// APIs: the blocking API's rounds on the caller's thread, the asio API's through the io thread.
TEST(Issue32RecordWindowTest, GrantsInsideTheWindowSkipTheCheckAndTheRecordCoversThem) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server);
  lock_and_unlock(client, "warm-up", 60s);
  const long long warm_up = server_ms(server);
  ASSERT_TRUE(server.command({"CONFIG", "RESETSTAT"}));
  for (int i = 0; i < 20; ++i) lock_and_unlock(client, "job-" + std::to_string(i), 60s);
  for (int i = 0; i < 20; ++i) {
    auto lease =
        async_try_lock(client, "async-" + std::to_string(i), ttl_of(60s), asio::use_future).get();
    ASSERT_TRUE(lease) << lease.error().message();
    ASSERT_TRUE(async_unlock(*lease, asio::use_future).get());
  }
  EXPECT_EQ(server.calls_of("zscore"), 0) << "a grant checked a record known to cover it";
  EXPECT_EQ(server.calls_of("pexpiretime"), 0) << "a grant checked a record known to cover it";
  EXPECT_EQ(server.calls_of("set"), 40) << "not every grant was counted";
  // The warm-up's check left the entry 1.5 ttls past it at least, past every lease since.
  EXPECT_GE(record_end(server, "60000"), warm_up + 90000);
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000);
}

// What the window does not cover is checked: a larger ttl, a new connection (the server may be a
// new process: a restart in place, a failover behind one address), and any grant after half a
// ttl. Each meets a record taken away by hand and must write it again.
TEST(Issue32RecordWindowTest, ALargerTtlANewConnectionAndTheEndOfTheWindowCheckAgain) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server);
  lock_and_unlock(client, "warm-up", 10s);  // a window of about 4.6 s for leases of 10 s
  ASSERT_TRUE(server.command({"DEL", "dlock:max-ttl"}));
  lock_and_unlock(client, "larger", 20s);
  EXPECT_GE(record_end(server, "20000"), server_ms(server) + 30000 - 1000)
      << "a grant of a ttl larger than the window's skipped the check";
  // The client's command connection killed (its subscriber is of type pubsub): the next request
  // goes on a new one, and is granted at the first attempt (the greeting's probe finds the close
  // first; a request bound to the window's connection would fail on a closed one, which
  // ServerNode also avoids by probing before it binds one).
  ASSERT_TRUE(server.command({"DEL", "dlock:max-ttl"}));
  ASSERT_TRUE(server.command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}));
  std::this_thread::sleep_for(100ms);  // the close reaches the client
  auto lease = client.try_lock("new-connection", ttl_of(20s));
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_GE(record_end(server, "20000"), server_ms(server) + 30000 - 1000)
      << "a window learnt on one connection was trusted on the next";
  ASSERT_TRUE(lease->unlock());
  // Leases of 1 s, from a client that never saw a larger ttl: its window ends some 280 ms after
  // the grant that checked (1.5 s less margins, less the lease and the node timeout of 200 ms).
  Client brief = client_on(server);
  lock_and_unlock(brief, "short", 1s);
  std::this_thread::sleep_for(400ms);
  ASSERT_TRUE(server.command({"DEL", "dlock:max-ttl"}));
  lock_and_unlock(brief, "after-the-window", 1s);
  EXPECT_GE(record_end(server, "1000"), server_ms(server) + 1500 - 500)
      << "a grant after the window skipped the check";
}

// Where keys may be evicted (ClientOptions::allow_eviction), every grant checks the record:
// grants that skip it never touch it, so under an LRU or LFU policy it would be the coldest of
// dlock's keys, evicted on its own (found in review).
TEST(Issue32RecordWindowTest, AClientThatAllowsEvictionChecksEveryGrant) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  ClientOptions options;
  options.nodes = {server.url()};
  options.allow_eviction = true;
  auto client = Client::create(options);
  ASSERT_TRUE(client) << client.error().message();
  lock_and_unlock(*client, "warm-up", 60s);
  ASSERT_TRUE(server.command({"CONFIG", "RESETSTAT"}));
  for (int i = 0; i < 10; ++i) lock_and_unlock(*client, "job-" + std::to_string(i), 60s);
  EXPECT_EQ(server.calls_of("zscore"), 10)
      << "a grant skipped the record where keys may be evicted";
}

// A free name on one node, the common grant, is acquire.lua's fast path: one EXISTS (the key, its
// readers and its counter) and no GETDEL of a counter it does not have; a name with a counter
// is still counted above it (TokensGrowAcrossCountersModesAndVersions).
TEST(Issue32NodeCounterTest, AFreeNameIsReadWithOneExistsAndNoGetdel) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server);
  lock_and_unlock(client, "warm-up", 60s);
  ASSERT_TRUE(server.command({"CONFIG", "RESETSTAT"}));
  for (int i = 0; i < 20; ++i) lock_and_unlock(client, "job-" + std::to_string(i), 60s);
  EXPECT_EQ(server.calls_of("exists"), 20);
  EXPECT_EQ(server.calls_of("getdel"), 0);
  EXPECT_EQ(server.calls_of("incr"), 20);
}

// The older dlock's acquire.lua on `server` for NAME: its reply {status, counter, pttl}.
test::ReplyPtr older_acquire(const RedisServer& server, const std::string& name,
                             const std::string& owner, const std::string& hold) {
  std::ifstream in(std::string(DLOCK_PRE_LEAN_DIR) + "/acquire.lua");
  std::stringstream text;
  text << in.rdbuf();
  return server.command({"EVAL", text.str(), "6", name, "dlock:fence:{" + name + "}",
                         "dlock:fence-floor", "dlock:max-ttl", "dlock:readers:{" + name + "}",
                         "dlock:writers-waiting:{" + name + "}", owner, hold, "10000", "w", "0",
                         "0"});
}

std::uint64_t token_of(Result<Lease>& lease) {
  EXPECT_TRUE(lease) << lease.error().message();
  return lease ? lease->fencing_token().value() : 0;
}

// One name taken in turn by this client's node counter, its fair mode (the name's counter), an
// older dlock (the name's counter, and a name counter of its own left behind) and this client
// again: every token larger than the one before, and each refused while another holds.
TEST(Issue32NodeCounterTest, TokensGrowAcrossCountersModesAndVersions) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server);
  auto first = client.try_lock("job", ttl_of(10s));
  const std::uint64_t t1 = token_of(first);
  EXPECT_EQ(server.command({"EXISTS", "dlock:fence:{job}"})->integer, 0)
      << "one node counts with the node's counter";
  auto refused = older_acquire(server, "job", "old", "old-client.1");
  ASSERT_TRUE(refused && refused->type == REDIS_REPLY_ARRAY) << (refused ? refused->str : "");
  EXPECT_EQ(refused->element[0]->integer, 0) << "an older client was granted a held lock";
  ASSERT_TRUE(first->unlock());

  auto older = older_acquire(server, "job", "old", "old-client.2");
  ASSERT_TRUE(older && older->type == REDIS_REPLY_ARRAY) << (older ? older->str : "");
  ASSERT_EQ(older->element[0]->integer, 1);
  const auto t2 = static_cast<std::uint64_t>(older->element[1]->integer);
  EXPECT_GT(t2, t1) << "the older client's token after this client's";
  auto while_older = client.try_lock("job", ttl_of(10s));
  EXPECT_FALSE(while_older) << "granted beside the older client's hold";
  ASSERT_TRUE(client.unlock("job", OwnerToken("old")));

  auto second = client.try_lock("job", ttl_of(10s));
  const std::uint64_t t3 = token_of(second);
  EXPECT_GT(t3, t2) << "the node counter after the older client's name counter";
  ASSERT_TRUE(second->unlock());

  LockOptions fair = ttl_of(10s);
  fair.fair = true;
  auto third = client.try_lock("job", fair);
  const std::uint64_t t4 = token_of(third);
  EXPECT_GT(t4, t3) << "the fair mode's name counter after the node counter";
  ASSERT_TRUE(third->unlock());

  // The older client leaves a name counter on another name; this client's next token is above
  // it too (one counter per node).
  auto other = older_acquire(server, "other", "old", "old-client.3");
  ASSERT_TRUE(other && other->type == REDIS_REPLY_ARRAY && other->element[0]->integer == 1);
  auto fourth = client.try_lock("job", ttl_of(10s));
  const std::uint64_t t5 = token_of(fourth);
  EXPECT_GT(t5, t4);
  EXPECT_GT(t5, static_cast<std::uint64_t>(other->element[1]->integer));
}

// No dlock writes a floor INCR cannot count, but one written by hand ("1.9e+15") must not make
// every grant on the node fail: it is read as the name's counter path reads it.
TEST(Issue32NodeCounterTest, AFloorThatIsNoIntegerIsReadNotAnError) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server);
  ASSERT_TRUE(server.command({"SET", "dlock:fence-floor", "1.9e+15"}));
  auto lease = client.try_lock("job", ttl_of(10s));
  EXPECT_EQ(token_of(lease), 1900000000000001u);
  EXPECT_EQ(server.command({"GET", "dlock:fence-floor"})->str, std::string("1900000000000001"));
}

// A lock set of several nodes counts with the node's counter too: one INCR per grant on each
// node, no name counter written; the token is the largest of the granting nodes' counters, and
// a token that is not on a quorum of them is raised there before it is handed out (the nodes'
// counters disagree: here set so by hand, in production by grants of other names reaching the
// nodes in different orders). Before, such a client counted with the name's counter (GET and
// SET of the name's counter and of the floor per grant).
struct TwoNodes {
  RedisServer a, b;
  Client make_client() {
    ClientOptions options;
    options.nodes = {a.url(), b.url()};
    auto c = Client::create(options);
    EXPECT_TRUE(c) << c.error().message();
    return std::move(c).value();
  }
  Client client = make_client();
};

std::uint64_t number_at(const RedisServer& server, const std::string& key) {
  const auto reply = server.command({"GET", key});
  return reply && reply->type == REDIS_REPLY_STRING ? std::stoull(reply->str) : 0;
}

TEST(Issue32NodeCounterTest, SeveralNodesCountWithTheNodeCounterAndRaiseATokenNotOnAQuorum) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  TwoNodes nodes;
  // Empty nodes: each counts from its clock (microseconds); the two clocks' counts differ, so
  // the larger is on one node of the two that must hold it, and is raised on the other.
  auto first = nodes.client.try_lock("a", ttl_of(10s));
  const std::uint64_t t1 = token_of(first);
  EXPECT_GT(t1, 1'000'000'000'000'000u);
  for (const RedisServer* server : {&nodes.a, &nodes.b}) {
    EXPECT_EQ(number_at(*server, "dlock:fence-floor"), t1) << "the token is not on both nodes";
    EXPECT_EQ(server->command({"EXISTS", "dlock:fence:{a}"})->integer, 0)
        << "the raise wrote a name counter the node did not have";
  }
  ASSERT_TRUE(first->unlock());
  // Counters that agree: one INCR each, the token one above, nothing raised.
  for (const RedisServer* server : {&nodes.a, &nodes.b}) {
    ASSERT_TRUE(server->command({"CONFIG", "RESETSTAT"}));
  }
  for (int i = 0; i < 10; ++i) lock_and_unlock(nodes.client, "job-" + std::to_string(i), 10s);
  for (const RedisServer* server : {&nodes.a, &nodes.b}) {
    EXPECT_EQ((*server).calls_of("incr"), 10);
    EXPECT_EQ((*server).calls_of("set"), 10) << "more than the lock key written per grant";
    EXPECT_EQ((*server).calls_of("get"), 20)
        << "more than the native acquisition's read and the release's per cycle";
    EXPECT_EQ((*server).calls_of("evalsha"), 10) << "an acquisition went as a script";
    EXPECT_EQ(number_at(*server, "dlock:fence-floor"), t1 + 10);
    EXPECT_EQ(server->command({"EXISTS", "dlock:fence:{job-0}"})->integer, 0)
        << "a name counter written by a grant of the node's counter";
  }
  // Counters that disagree: the larger is the token, raised on the node that counted less.
  ASSERT_TRUE(nodes.b.command({"SET", "dlock:fence-floor", "4000000000000000"}));
  auto second = nodes.client.try_lock("b", ttl_of(10s));
  EXPECT_EQ(token_of(second), 4'000'000'000'000'001u);
  EXPECT_EQ(number_at(nodes.a, "dlock:fence-floor"), 4'000'000'000'000'001u)
      << "handed out a token that one of the two nodes does not hold";
  // Held: another client is refused, and nothing is counted.
  Client other = nodes.make_client();
  EXPECT_FALSE(other.try_lock("b", ttl_of(10s))) << "granted beside a holder";
  EXPECT_EQ(number_at(nodes.a, "dlock:fence-floor"), 4'000'000'000'000'001u);
  EXPECT_EQ(number_at(nodes.b, "dlock:fence-floor"), 4'000'000'000'000'001u);
  ASSERT_TRUE(second->unlock());
  // The next holder of the name, of any client, gets a larger token.
  auto third = other.try_lock("b", ttl_of(10s));
  EXPECT_EQ(token_of(third), 4'000'000'000'000'002u);
  ASSERT_TRUE(third->unlock());
  // Readers keep a writer out on this path as on the others.
  auto reader = nodes.client.try_lock_shared("d", ttl_of(10s));
  ASSERT_TRUE(reader) << reader.error().message();
  EXPECT_FALSE(other.try_lock("d", ttl_of(10s))) << "a writer granted beside a reader";
  ASSERT_TRUE(reader->unlock());
}

// acquire.lua by the name's counter (ARGV[7] ''), as a dlock client of several nodes sent it
// before it counted with the node's (such clients may share the nodes with this one): its fast
// path (before the functions, with no TIME) counts a free name from the name's counter, else
// from the node's floor, else from the clock, and the floor follows every token. The token of a
// grant (0 if refused).
long long by_name_counter(const RedisServer& server, const std::string& name,
                          const std::string& owner, const std::string& hold) {
  const node::Call call =
      lock::acquire_call(lock::HoldId{name, OwnerToken(owner), hold, lock::HoldKind::write}, 10s,
                         std::nullopt, {}, 0, {}, lock::TokenCounter::name);
  std::vector<std::string> args{"EVAL", std::string(call.script->source),
                                std::to_string(call.keys.size())};
  for (const std::string_view key : call.keys) args.emplace_back(key);
  for (const std::string_view arg : call.args) args.emplace_back(arg);
  const auto r = server.command(args);
  EXPECT_TRUE(r && r->type != REDIS_REPLY_ERROR) << (r && r->str ? r->str : "no reply");
  return r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
}

TEST(Issue32NameCounterTest, AFreeNameCountsFromItsCounterTheFloorOrTheClock) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  // 2 s: its releases are what it tests, and the 200 ms default ran out on one with 32 tests
  // at once on 2 cores.
  Client client = client_on(server, 2s);
  // An empty node: from the clock (microseconds), above any token it handed out before it lost
  // its memory.
  const auto t1 = static_cast<std::uint64_t>(by_name_counter(server, "a", "o", "old.1"));
  EXPECT_GT(t1, 1'000'000'000'000'000u);
  EXPECT_EQ(number_at(server, "dlock:fence:{a}"), t1) << "no name counter written";
  EXPECT_EQ(number_at(server, "dlock:fence-floor"), t1) << "the floor did not follow";
  ASSERT_TRUE(client.unlock("a", OwnerToken("o")));
  // The name's counter, one above.
  EXPECT_EQ(static_cast<std::uint64_t>(by_name_counter(server, "a", "o", "old.2")), t1 + 1);
  ASSERT_TRUE(client.unlock("a", OwnerToken("o")));
  // A new name: from the floor, one above.
  ASSERT_TRUE(server.command({"SET", "dlock:fence-floor", "4000000000000000"}));
  EXPECT_EQ(by_name_counter(server, "b", "o", "old.3"), 4'000'000'000'000'001);
  EXPECT_EQ(number_at(server, "dlock:fence-floor"), 4'000'000'000'000'001u);
  EXPECT_EQ(number_at(server, "dlock:fence:{b}"), 4'000'000'000'000'001u);
  ASSERT_TRUE(client.unlock("b", OwnerToken("o")));
  // A name's counter above the floor (the floor lost to an eviction, or written by hand):
  // counted from it, and the floor raised to the token.
  ASSERT_TRUE(server.command({"SET", "dlock:fence:{c}", "9000000000000000", "PX", "10000"}));
  EXPECT_EQ(by_name_counter(server, "c", "o", "old.4"), 9'000'000'000'000'001);
  EXPECT_EQ(number_at(server, "dlock:fence-floor"), 9'000'000'000'000'001u);
  // Held: refused, and nothing is counted; this client's node counter counts above it.
  EXPECT_EQ(by_name_counter(server, "c", "p", "other.1"), 0) << "granted beside a holder";
  EXPECT_EQ(number_at(server, "dlock:fence:{c}"), 9'000'000'000'000'001u);
  ASSERT_TRUE(client.unlock("c", OwnerToken("o")));
  auto next = client.try_lock("c", ttl_of(10s));
  EXPECT_GT(token_of(next), 9'000'000'000'000'001u);
  ASSERT_TRUE(next->unlock());
  // Readers keep a writer out on this path as on the others.
  auto reader = client.try_lock_shared("d", ttl_of(10s));
  ASSERT_TRUE(reader) << reader.error().message();
  EXPECT_EQ(by_name_counter(server, "d", "p", "other.2"), 0) << "a writer granted beside a reader";
  ASSERT_TRUE(reader->unlock());
}

// A count at or below 10^15 counts nothing (acquire.lua's count_of()). No dlock writes one (every
// count starts from the clock in microseconds), but an INCR of an absent floor writes 1: a client
// that takes its token with a plain INCR would leave one where a flush, a DEL or an eviction took
// the floor, and every script that counted on from it handed out tokens below those handed out
// before (here 2, then 6 and 4 by the name's counter, then 4 in fair mode). Each now counts from
// the clock (or a real count) and writes the floor over.
std::uint64_t micros_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// A server, a client of it, and a time in microseconds every count from the server's clock
// passes (a minute of slack for its clock against ours).
struct SmallCounts {
  RedisServer server;
  Client client = client_on(server);
  const std::uint64_t before = micros_now() - 60'000'000;
};

TEST(Issue32SmallCountTest, AFloorOfOneIsNoneForTheNodeCounter) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  SmallCounts t;
  ASSERT_TRUE(t.server.command({"SET", "dlock:fence-floor", "1"}));
  auto lease = t.client.try_lock("job", ttl_of(10s));
  const std::uint64_t token = token_of(lease);
  EXPECT_GT(token, t.before) << "counted on from a floor of 1";
  EXPECT_EQ(number_at(t.server, "dlock:fence-floor"), token) << "the floor not written over";
  ASSERT_TRUE(lease->unlock());
  auto next = t.client.try_lock("job", ttl_of(10s));
  EXPECT_EQ(token_of(next), token + 1);
}

TEST(Issue32SmallCountTest, SmallCountsAreNoneForTheNameCounter) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  SmallCounts t;
  // A floor of 3, no name counter: from the clock.
  ASSERT_TRUE(t.server.command({"SET", "dlock:fence-floor", "3"}));
  const long long a = by_name_counter(t.server, "a", "o", "old.1");
  EXPECT_GT(static_cast<std::uint64_t>(a), t.before) << "counted on from a floor of 3";
  EXPECT_EQ(number_at(t.server, "dlock:fence-floor"), static_cast<std::uint64_t>(a));
  // A name counter of 5 beside a real floor: from the floor.
  ASSERT_TRUE(t.server.command({"SET", "dlock:fence-floor", "4000000000000000"}));
  ASSERT_TRUE(t.server.command({"SET", "dlock:fence:{b}", "5", "PX", "10000"}));
  EXPECT_EQ(by_name_counter(t.server, "b", "o", "old.2"), 4'000'000'000'000'001);
  // Both small: from the clock.
  ASSERT_TRUE(t.server.command({"SET", "dlock:fence-floor", "2"}));
  ASSERT_TRUE(t.server.command({"SET", "dlock:fence:{c}", "3", "PX", "10000"}));
  EXPECT_GT(static_cast<std::uint64_t>(by_name_counter(t.server, "c", "o", "old.3")), t.before);
}

TEST(Issue32SmallCountTest, SmallCountsAreNoneInFairMode) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  SmallCounts t;
  ASSERT_TRUE(t.server.command({"SET", "dlock:fence-floor", "3"}));
  LockOptions fair = ttl_of(10s);
  fair.fair = true;
  auto first = t.client.try_lock("a", fair);
  EXPECT_GT(token_of(first), t.before) << "counted on from a floor of 3";
  ASSERT_TRUE(t.server.command({"SET", "dlock:fence:{b}", "7", "PX", "10000"}));
  auto second = t.client.try_lock("b", fair);
  EXPECT_GT(token_of(second), token_of(first)) << "counted on from a name counter of 7";
}

// Fair mode counts by the name's counter: beside a lost floor, its grant writes the floor at
// least the clock (acquire.lua's raise_floor()), or the next holder of another name by the
// node's counter got a token below its last (the second review of the 10^15 rule).
TEST(Issue32SmallCountTest, ALostFloorIsWrittenAtLeastTheClockInFairMode) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  SmallCounts t;
  auto b = t.client.try_lock("b", ttl_of(10s));
  const std::uint64_t before = token_of(b);  // the server's clock, about now
  ASSERT_TRUE(b->unlock());
  ASSERT_TRUE(t.server.command({"DEL", "dlock:fence-floor"}));
  const std::uint64_t second_ago = before - 1'000'000;
  ASSERT_TRUE(
      t.server.command({"SET", "dlock:fence:{a}", std::to_string(second_ago), "PX", "10000"}));
  LockOptions fair = ttl_of(10s);
  fair.fair = true;
  auto a = t.client.try_lock("a", fair);
  EXPECT_EQ(token_of(a), second_ago + 1);
  ASSERT_TRUE(a->unlock());
  auto next = t.client.try_lock("b", ttl_of(10s));
  EXPECT_GT(token_of(next), before) << "counted from a's token";
}

// The common grant of a lock set of several nodes (a free name, the max-ttl record covering
// its ttl) runs on the fast path: no TIME (the general path's record test reads it), and no
// check of the record at all while the first grant's says it covers the leases
// (Issue32RecordWindowTest).
TEST(Issue32NameCounterTest, AFreeNameOnSeveralNodesIsGrantedOnTheFastPath) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  TwoNodes nodes;
  lock_and_unlock(nodes.client, "warm-up", 60s);
  for (const RedisServer* server : {&nodes.a, &nodes.b}) {
    ASSERT_TRUE(server->command({"CONFIG", "RESETSTAT"}));
  }
  for (int i = 0; i < 10; ++i) lock_and_unlock(nodes.client, "job-" + std::to_string(i), 60s);
  for (const RedisServer* server : {&nodes.a, &nodes.b}) {
    EXPECT_EQ((*server).calls_of("time"), 0) << "a grant took the general path";
    EXPECT_EQ((*server).calls_of("exists"), 10);
    EXPECT_EQ((*server).calls_of("pexpiretime"), 0) << "a grant checked a record known to cover it";
  }
}

// Found by the chaos runner's async workers: a granted acquisition still settles with the
// membership (its lock), which a greeting holds while it waits for a slow node; an acquisition
// whose settling waited past its validity handed over a lease with none left, and the holder
// used it. Here one node answers 300 ms late, and acquisitions of ever larger ttls queue their
// greetings, each 300 ms, ahead of the settling of a lease of 1.5 s: it must be refused (and
// released), never handed over with no validity.
TEST(Issue32HandOverTest, ALeaseWhoseValidityRanOutWhileSettlingIsNotHandedOver) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  std::vector<std::unique_ptr<RedisServer>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<RedisServer>());
  test::TcpProxy slow("127.0.0.1", servers[2]->port());
  ClientOptions options;
  options.node_timeout = 3s;
  options.nodes = {servers[0]->url(), servers[1]->url(),
                   "redis://127.0.0.1:" + std::to_string(slow.port())};
  auto created = Client::create(options);
  ASSERT_TRUE(created) << created.error().message();
  Client client = std::move(*created);
  lock_and_unlock(client, "warm-up", 1500ms);  // 1.5 s announced: the lease below greets nothing
  slow.delay_replies(300ms);
  Result<Lease> lease = Error(errc::io_error, "not run");
  std::chrono::milliseconds left_on_arrival{-1};
  std::thread holder([&] {
    lease = client.try_lock("job", ttl_of(1500ms));
    if (lease) left_on_arrival = lease->validity();
  });
  std::this_thread::sleep_for(20ms);  // its round under way: its settling queues last
  std::vector<std::thread> greeters;
  for (int i = 0; i < 8; ++i) {
    greeters.emplace_back([&client, i] {
      auto other = client.try_lock("other-" + std::to_string(i), ttl_of(2s + i * 1s));
      if (other) (void)other->unlock();
    });
  }
  holder.join();
  for (auto& t : greeters) t.join();
  slow.forward();
  if (lease) {
    EXPECT_GT(left_on_arrival.count(), 0) << "a lease handed over with no validity left";
    (void)lease->unlock();
  } else {
    EXPECT_EQ(lease.error().code(), errc::timeout) << lease.error().message();
    EXPECT_EQ(servers[0]->command({"EXISTS", "job"})->integer, 0) << "refused, not released";
  }
}

// A wait's lease that lapsed while the wait settled (end_wait_task queues behind greetings to a
// slow node, here a stream of them, each for a larger ttl) is dropped, and the wait tries again
// while it has time: lock() ends with a lease that has validity left, never with errc::timeout
// after a grant. Before, the lapsed lease was released and lock() failed with errc::timeout
// though most of its wait was left. Both waits: Client::lock's on the caller's thread (each wait
// run to its end there) and async_lock's on the io thread.
TEST(Issue32HandOverTest, AWaitWhoseLeaseLapsedWhileSettlingTriesAgain) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  std::vector<std::unique_ptr<RedisServer>> servers;
  for (int i = 0; i < 3; ++i) servers.push_back(std::make_unique<RedisServer>());
  test::TcpProxy slow("127.0.0.1", servers[2]->port());
  ClientOptions options;
  options.node_timeout = 3s;
  options.nodes = {servers[0]->url(), servers[1]->url(),
                   "redis://127.0.0.1:" + std::to_string(slow.port())};
  auto created = Client::create(options);
  ASSERT_TRUE(created) << created.error().message();
  Client client = std::move(*created);
  lock_and_unlock(client, "warm-up", 1500ms);
  slow.delay_replies(300ms);
  // Greetings for ever larger ttls, one after the other, for 12 s: the membership's mutex is
  // held by one of them (300 ms each, the slow node's reply) nearly all the time.
  std::atomic<bool> greeting{true};
  std::atomic<int> next_ttl_s{2};
  std::vector<std::thread> greeters;
  for (int i = 0; i < 6; ++i) {
    greeters.emplace_back([&] {
      while (greeting.load()) {
        const int ttl_s = next_ttl_s.fetch_add(1);
        auto other =
            client.try_lock("other-" + std::to_string(ttl_s), ttl_of(std::chrono::seconds(ttl_s)));
        if (other) (void)other->unlock();
      }
    });
  }
  std::thread stopper([&greeting] {
    std::this_thread::sleep_for(12s);
    greeting = false;
  });
  int lapsed = 0;
  for (int round = 0; round < 6; ++round) {
    // Odd rounds through the asio API: its wait loops on the io thread.
    Result<Lease> lease =
        round % 2 == 0 ? client.lock("job", 30s, ttl_of(3s))
                       : dlock::async_lock(client, "job", 30s, ttl_of(3s), asio::use_future).get();
    if (!lease) {
      ++lapsed;
      ADD_FAILURE() << "round " << round << ": " << lease.error().message();
      continue;
    }
    EXPECT_GT(lease->validity().count(), 0) << "a lease handed over with no validity left";
    (void)lease->unlock();
  }
  stopper.join();
  for (auto& t : greeters) t.join();
  slow.forward();
  EXPECT_EQ(lapsed, 0);
}

}  // namespace
}  // namespace dlock

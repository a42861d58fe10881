// SPDX-License-Identifier: MIT
// Issue 32 (a lean protocol): what the cheaper scripts changed, on a real redis-server. A grant
// records its ttl in dlock:max-ttl for two ttls and dlock:max-ttl-fresh says so for one, so the
// grants meanwhile skip the record; the record must still be there for every lease that may
// live, also when something took it away under the marker (an eviction, an operator's DEL).
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/redis_server.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

Client client_on(const RedisServer& server) {
  ClientOptions options;
  options.nodes = {server.url()};
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

// How many times the server ran `command`, inside scripts too (INFO commandstats).
long long calls_of(const RedisServer& server, const std::string& command) {
  const auto info = server.command({"INFO", "commandstats"});
  const std::string text = info->str;
  const std::string key = "cmdstat_" + command + ":calls=";
  const auto at = text.find(key);
  return at == std::string::npos ? 0 : std::stoll(text.substr(at + key.size()));
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
  ASSERT_TRUE(server.command({"CONFIG", "RESETSTAT"}));
  for (int i = 0; i < 20; ++i) lock_and_unlock(client, "job-" + std::to_string(i), 60s);
  EXPECT_EQ(calls_of(server, "zadd"), 0) << "a grant recorded a ttl its record already covers";
  // The last grant's lease ends within 60 s of now; its record at least that late.
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000);
  // Another ttl is recorded at once: the marker names one ttl.
  lock_and_unlock(client, "other", 90s);
  EXPECT_GE(record_end(server, "90000"), server_ms(server) + 90000);
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000 - 5000);
}

// The marker alone is not trusted: a policy that evicts keys with a ttl may take dlock:max-ttl
// and leave dlock:max-ttl-fresh. A grant then records again (a node that restarts later must
// know the lease's ttl to quarantine itself long enough).
TEST(Issue32RecordTest, ARecordTakenAwayUnderItsMarkerIsWrittenAgain) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server);
  lock_and_unlock(client, "first", 60s);
  ASSERT_GE(record_end(server, "60000"), 0);
  ASSERT_EQ(server.command({"EXISTS", "dlock:max-ttl-fresh"})->integer, 1);
  // What an eviction does: the record goes, its marker stays.
  ASSERT_TRUE(server.command({"DEL", "dlock:max-ttl"}));
  auto held = client.try_lock("second", ttl_of(60s));
  ASSERT_TRUE(held) << held.error().message();
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000 - 1000)
      << "a grant under a marker whose record was gone recorded nothing";
  ASSERT_TRUE(held->unlock());
  // The record evicted and made again by something else (a renewal round's record of another
  // ttl): the key exists, the entry of this ttl does not.
  ASSERT_TRUE(server.command({"DEL", "dlock:max-ttl"}));
  ASSERT_TRUE(server.command(
      {"ZADD", "dlock:max-ttl", std::to_string(server_ms(server) + 30000), "15000"}));
  lock_and_unlock(client, "third", 60s);
  EXPECT_GE(record_end(server, "60000"), server_ms(server) + 60000 - 1000)
      << "a grant trusted the marker over a record without its ttl";
}

}  // namespace
}  // namespace dlock

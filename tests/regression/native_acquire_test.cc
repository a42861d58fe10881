// SPDX-License-Identifier: MIT
// Issue 32, the native acquisition (docs/protocol.md, "The native acquisition"): where a plain
// server node knows its record of lease ttls covers a write acquisition, it sends acquire.lua's
// fast path as four plain commands (SET NX PX, EXISTS, INCR, GET) written together, and acquire.lua
// only when their replies are not a plain grant. On a real redis-server: the grants go so, and
// every case the commands cannot answer (a held name, readers, a lost counter, a name's
// counter, an ACL without the commands) ends as acquire.lua would have ended it, with nothing
// of the attempt left behind.
#include <dlock/async.h>
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lock/calls.h"
#include "lock/hold.h"
#include "node/call.h"
#include "scripts/script.h"
#include "support/redis_server.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

constexpr std::uint64_t kCountsFrom = 1'000'000'000'000'000;  // 10^15: tokens count from the clock

Client client_on(const std::string& url) {
  ClientOptions options;
  options.nodes = {url};
  auto c = Client::create(options);
  EXPECT_TRUE(c) << c.error().message();
  return std::move(c).value();
}

LockOptions plain(std::chrono::milliseconds ttl = 60s) {
  LockOptions o;
  o.ttl = ttl;
  o.auto_renew = false;
  return o;
}

std::uint64_t floor_of(const RedisServer& server) {
  const auto floor = server.command({"GET", "dlock:fence-floor"});
  return floor && floor->str != nullptr ? std::stoull(floor->str) : 0;
}

// One grant and release on `client` (its first, which checks the record: the record window then
// covers the next ones).
void warm_up(Client& client) {
  auto warm = client.try_lock("warm-up", plain());
  ASSERT_TRUE(warm) << warm.error().message();
  ASSERT_TRUE(warm->unlock());
}

// `waiter` waits for `name`; `release` (the holder's unlock) must wake it long before its timer,
// and its token must pass `before`.
void expect_woken(Client& waiter, const std::string& name, const std::function<bool()>& release,
                  std::uint64_t before) {
  auto waiting = std::async(std::launch::async, [&] { return waiter.lock(name, 20s, plain()); });
  std::this_thread::sleep_for(200ms);
  const auto released = std::chrono::steady_clock::now();
  ASSERT_TRUE(release());
  auto got = waiting.get();
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - released, 10s) << "the waiter slept to its timer";
  EXPECT_GT(got->fencing_token().value(), before);
  ASSERT_TRUE(got->unlock());
}

// A grant inside the record window (after the first, which checks the record) is the four
// commands: no script call but the releases, one SET, EXISTS, INCR and GET each (and the
// release's GET), tokens growing from
// the node's counter. The asio API's lone acquisitions go so too.
TEST(NativeAcquireTest, GrantsInsideTheRecordWindowAreFourPlainCommands) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server.url());
  warm_up(client);
  std::uint64_t last = floor_of(server);  // before RESETSTAT: its GET is not the client's
  ASSERT_TRUE(server.command({"CONFIG", "RESETSTAT"}));
  for (int i = 0; i < 20; ++i) {
    auto lease = client.try_lock(i % 2 == 0 ? "job" : "job-" + std::to_string(i), plain());
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_GT(lease->fencing_token().value(), last);
    last = lease->fencing_token().value();
    ASSERT_TRUE(lease->unlock());
  }
  for (int i = 0; i < 10; ++i) {
    auto lease = async_try_lock(client, "async", plain(), asio::use_future).get();
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_GT(lease->fencing_token().value(), last);
    last = lease->fencing_token().value();
    ASSERT_TRUE(async_unlock(*lease, asio::use_future).get());
  }
  EXPECT_EQ(server.calls_of("evalsha") + server.calls_of("eval"), 30)
      << "an acquisition inside the window went as a script (30 releases)";
  EXPECT_EQ(server.calls_of("set"), 30);
  EXPECT_EQ(server.calls_of("incr"), 30);
  EXPECT_EQ(server.calls_of("exists"), 30);
  EXPECT_EQ(server.calls_of("get"), 60);
  EXPECT_EQ(floor_of(server), last) << "a token is the node's counter after its INCR";
  for (const char* name : {"job", "job-1", "async"}) EXPECT_FALSE(server.exists(name)) << name;
}

// A held name: the SET is refused, acquire.lua runs and refuses as it would have (the holder's
// ttl, its hold flagged for the waiter), the holder's key untouched otherwise.
TEST(NativeAcquireTest, AHeldNameIsRefusedByTheScriptAndFlaggedForTheWaiter) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client holder = client_on(server.url());
  Client other = client_on(server.url());
  warm_up(other);
  auto held = holder.try_lock("shared-name", plain());
  ASSERT_TRUE(held) << held.error().message();
  const std::string value = server.command({"GET", "shared-name"})->str;
  ASSERT_EQ(value.rfind("dlock. ", 0), 0U) << value;

  auto refused = other.try_lock("shared-name", plain());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), errc::lock_held) << refused.error().message();
  ASSERT_TRUE(refused.error().holder_ttl());
  EXPECT_GT(refused.error().holder_ttl()->count(), 50000);
  EXPECT_EQ(server.command({"GET", "shared-name"})->str, "dlock!" + value.substr(6))
      << "the refusal did not flag the hold (its release would not wake the waiter)";
  EXPECT_TRUE(held->is_held());

  // A waiter: woken by the holder's release, granted at once.
  expect_woken(
      other, "shared-name", [&] { return static_cast<bool>(held->unlock()); },
      held->fencing_token().value());
}

// A reader that holds the name before the writer's SET: the EXISTS finds it, acquire.lua refuses
// the writer and takes its SET's key back (AcquireLuaTakesBackOnlyTheNativeSetsOwnKeyBesideReaders
// checks that alone: here the attempt's failure path would release it too), the reader keeps
// its hold, and a writer that waits gets the lock once the reader leaves.
TEST(NativeAcquireTest, AReaderSeenAfterTheSetRefusesTheWriterAndNothingIsLeft) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client reader = client_on(server.url());
  Client writer = client_on(server.url());
  warm_up(writer);
  auto reading = reader.try_lock_shared("catalog", plain());
  ASSERT_TRUE(reading) << reading.error().message();
  ASSERT_TRUE(server.command({"CONFIG", "RESETSTAT"}));

  auto refused = writer.try_lock("catalog", plain());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), errc::lock_held) << refused.error().message();
  EXPECT_EQ(server.calls_of("set"), 1) << "the writer did not go as plain commands";
  EXPECT_FALSE(server.exists("catalog")) << "the writer's SET was left on the server";
  EXPECT_TRUE(reading->is_held());
  LockOptions another = plain();
  another.owner = OwnerToken("another reader");
  auto second = reader.try_lock_shared("catalog", another);
  ASSERT_TRUE(second) << "a reader was kept out after the writer's refusal: "
                      << second.error().message();
  ASSERT_TRUE(second->unlock());

  expect_woken(
      writer, "catalog", [&] { return static_cast<bool>(reading->unlock()); },
      reading->fencing_token().value());
}

// The floor lost inside the window (an operator's DEL, a FLUSHALL): the INCR writes 1, which
// counts nothing; acquire.lua then counts from the server's clock, above every token before.
TEST(NativeAcquireTest, AFloorLostInsideTheWindowIsCountedFromTheClock) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server.url());
  auto first = client.try_lock("ledger", plain());
  ASSERT_TRUE(first) << first.error().message();
  const std::uint64_t before = first->fencing_token().value();
  ASSERT_TRUE(first->unlock());
  for (const auto& wipe :
       std::vector<std::vector<std::string>>{{"DEL", "dlock:fence-floor"}, {"FLUSHALL"}}) {
    ASSERT_TRUE(server.command(wipe));
    auto lease = client.try_lock("ledger", plain());
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_GT(lease->fencing_token().value(), before) << wipe[0];
    EXPECT_GT(lease->fencing_token().value(), kCountsFrom) << wipe[0];
    EXPECT_GE(floor_of(server), lease->fencing_token().value()) << wipe[0];
    ASSERT_TRUE(lease->unlock());
  }
}

// A name's counter (left by a client of the name's counter: an older dlock, fair mode) ahead of
// the node's: the EXISTS finds it, acquire.lua takes the hold the SET wrote, counts above it and
// takes the counter away.
TEST(NativeAcquireTest, ANamesCounterAheadOfTheNodesIsPassed) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server.url());
  warm_up(client);
  const std::uint64_t ahead = floor_of(server) + 1'000'000;
  ASSERT_TRUE(
      server.command({"SET", "dlock:fence:{orders}", std::to_string(ahead), "PX", "60000"}));
  auto lease = client.try_lock("orders", plain());
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_GT(lease->fencing_token().value(), ahead);
  EXPECT_FALSE(server.exists("dlock:fence:{orders}"));
  ASSERT_TRUE(lease->unlock());
  EXPECT_FALSE(server.exists("orders"));
}

// The second review: the take-back of a SET that met readers or a name's counter went as a
// release.lua of its own before acquire.lua; a NOSCRIPT for it alone (a SCRIPT FLUSH, then
// acquire.lua's text cached again but not release.lua's) reissued it by EVAL behind acquire.lua,
// which had granted this very hold: the release then deleted a granted lock, and a second
// client took it too. acquire.lua now takes the SET back itself, only where it refuses.
TEST(NativeAcquireTest, AFlushedScriptCacheNeverTakesAGrantedHoldBack) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_on(server.url());
  Client other = client_on(server.url());
  warm_up(client);
  warm_up(other);
  const std::uint64_t ahead = floor_of(server) + 1'000'000;
  ASSERT_TRUE(
      server.command({"SET", "dlock:fence:{orders}", std::to_string(ahead), "PX", "60000"}));
  ASSERT_TRUE(server.command({"SCRIPT", "FLUSH"}));
  for (const scripts::Script* script : scripts::all()) {
    if (script->name != "acquire") continue;
    ASSERT_TRUE(server.command({"SCRIPT", "LOAD", script->source}));
    if (script->has_unguarded()) {
      ASSERT_TRUE(server.command({"SCRIPT", "LOAD", script->unguarded_source}));
    }
  }
  auto lease = client.try_lock("orders", plain());
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_GT(lease->fencing_token().value(), ahead);
  std::this_thread::sleep_for(100ms);  // anything still queued behind the grant has run
  EXPECT_TRUE(server.exists("orders")) << "the granted hold's key was taken away";
  auto second = other.try_lock("orders", plain());
  EXPECT_FALSE(second) << "two holders";
  if (!second) {
    EXPECT_EQ(second.error().code(), errc::lock_held) << second.error().message();
  }
  ASSERT_TRUE(lease->unlock());
}

// acquire.lua run as the native form's `after` call sends it (ARGV[9], ARGV[10]: the SET wrote),
// on a name a reader holds: it takes back only this very hold's key, and not beside a reader
// of this owner and client (the read that may join a write key its own client counted: the
// third review), and wakes the name's waiters with '' (also when nobody could flag the key).
TEST(NativeAcquireTest, AcquireLuaTakesBackOnlyTheNativeSetsOwnKeyBesideReaders) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client reader = client_on(server.url());
  auto reading = reader.try_lock_shared("cat", plain());
  ASSERT_TRUE(reading) << reading.error().message();
  // A subscriber of the name's release channel, on a connection of its own.
  redisContext* sub = redisConnect("127.0.0.1", server.port());
  ASSERT_TRUE(sub != nullptr && sub->err == 0);
  freeReplyObject(redisCommand(sub, "SUBSCRIBE dlock:release:{cat}"));
  const timeval wait{0, 300000};
  redisSetTimeout(sub, wait);
  const auto message = [&]() -> std::optional<std::string> {
    void* r = nullptr;
    if (redisGetReply(sub, &r) != REDIS_OK || r == nullptr) return std::nullopt;
    auto* reply = static_cast<redisReply*>(r);
    std::optional<std::string> payload;
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 3) payload = reply->element[2]->str;
    freeReplyObject(reply);
    return payload;
  };
  const scripts::Script* acquire = nullptr;
  for (const scripts::Script* script : scripts::all()) {
    if (script->name == "acquire") acquire = script;
  }
  ASSERT_NE(acquire, nullptr);
  // acquire.lua as the `after` call of hold `id` of owner `owner`: its reply's first element.
  const auto after = [&](const std::string& id, const std::string& owner) {
    const node::Call call =
        lock::acquire_call(lock::HoldId{"cat", OwnerToken(owner), id, lock::HoldKind::write}, 60s,
                           std::nullopt, lock::WriterWait{}, 0, "", lock::TokenCounter::node);
    const node::Call sent = call.native.after(call);
    std::vector<std::string> args{"EVAL", acquire->source, std::to_string(sent.keys.size())};
    for (const auto k : sent.keys) args.emplace_back(k);
    for (const auto a : sent.args) args.emplace_back(a);
    const auto r = server.command(args);
    return r && r->type == REDIS_REPLY_ARRAY ? r->element[0]->integer : -99;
  };
  // This very hold's key, flagged or not: taken back, the waiters woken.
  for (const char* flag : {"!", "."}) {
    ASSERT_TRUE(
        server.command({"SET", "cat", std::string("dlock") + flag + " w1.5 o", "PX", "60000"}));
    EXPECT_EQ(after("w1.5", "o"), 0) << "refused by the reader";
    EXPECT_FALSE(server.exists("cat")) << flag << ": the native SET's key was left";
    EXPECT_EQ(message(), std::optional<std::string>("")) << flag << ": nobody was woken";
  }
  // Another hold's key (an older hold of the same owner): kept, flagged, nobody woken.
  ASSERT_TRUE(server.command({"SET", "cat", "dlock. w1.3 o", "PX", "60000"}));
  EXPECT_EQ(after("w1.5", "o"), 0);
  EXPECT_EQ(std::string(server.command({"GET", "cat"})->str), "dlock! w1.3 o");
  EXPECT_EQ(message(), std::nullopt);
  // Beside a reader of this owner and client (the reader's own): kept (flagged), not taken back.
  ASSERT_TRUE(server.command({"DEL", "cat"}));
  const auto members = server.command({"ZRANGE", "dlock:readers:{cat}", "0", "-1"});
  std::string reader_id;
  for (std::size_t i = 0; i < members->elements; ++i) {
    const std::string m = members->element[i]->str;
    if (!m.empty()) reader_id = m.substr(0, m.find(' '));
  }
  ASSERT_FALSE(reader_id.empty());
  const std::string client = reader_id.substr(0, reader_id.rfind('.'));
  const std::string owner = reading->owner().str();
  ASSERT_TRUE(server.command({"SET", "cat", "dlock. " + client + ".99 " + owner, "PX", "60000"}));
  EXPECT_EQ(after(client + ".99", owner), 0);
  EXPECT_TRUE(server.exists("cat")) << "taken back beside a reader of its own client";
  ASSERT_TRUE(server.command({"DEL", "cat"}));
  ASSERT_TRUE(reading->unlock());
  redisFree(sub);
}

// An ACL user without INCR (acquire.lua takes it by pcall and counts from the floor's GET):
// the first native attempt's refusal sends acquire.lua, and every later acquisition goes as the
// script: one top-level refusal in the server's ACL LOG, then only the script's own.
TEST(NativeAcquireTest, AServerThatRefusesAPlainCommandGetsTheScriptFromThenOn) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  ASSERT_TRUE(server.command({"ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-incr"}));
  Client client = client_on("redis://app:pw@127.0.0.1:" + std::to_string(server.port()));
  std::uint64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    auto lease = client.try_lock("job", plain());
    ASSERT_TRUE(lease) << i << ": " << lease.error().message();
    EXPECT_GT(lease->fencing_token().value(), last);
    last = lease->fencing_token().value();
    ASSERT_TRUE(lease->unlock());
  }
  // ACL LOG: entries of (count, reason, context, object, ...) pairs, one per kind of refusal.
  long long top_level = -1;
  const auto log = server.command({"ACL", "LOG"});
  for (std::size_t e = 0; e < log->elements; ++e) {
    const auto* entry = log->element[e];
    long long count = 0;
    std::string context, object;
    for (std::size_t k = 0; k + 1 < entry->elements; k += 2) {
      const std::string field = entry->element[k]->str;
      const auto* value = entry->element[k + 1];
      if (field == "count") count = value->integer;
      if (field == "context") context = value->str;
      if (field == "object") object = value->str;
    }
    if (context == "toplevel" && object == "incr") top_level = count;
  }
  EXPECT_EQ(top_level, 1) << "the plain commands were not tried once and then left alone";
  EXPECT_FALSE(server.exists("job"));
}

}  // namespace
}  // namespace dlock

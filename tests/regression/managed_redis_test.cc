// SPDX-License-Identifier: MIT
// A managed or hardened Redis (ElastiCache, Memorystore, Azure Cache, a company's own): what
// dlock does on each restriction such a server may have, on real redis-server processes
// configured that way. docs/safety.md ("What dlock needs from a managed Redis") sums it up.
//   1. an idle `timeout`: idle connections are closed by the server (pub/sub ones are not);
//   2. subscriber connections killed (`CLIENT KILL TYPE pubsub`, client-output-buffer-limit);
//   3. admin commands renamed away or denied by ACL (CONFIG, CLIENT, SCRIPT, INFO, EVALSHA);
//   4. ACL users restricted to key patterns and pub/sub channels;
//   5. maxmemory reached under noeviction;
//   6. a replica given as a node.
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>
#include <set>
#include <string>
#include <thread>

#include "lock/keys.h"
#include "support/lock_clients.h"
#include "support/redis_server.h"
#include "support/replication.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::eventually;
using test::RedisServer;
using test::ServerOptions;

using test::fixed;
using test::in_sync;
using test::info_field;
using test::quick_master;
using test::replica_of;
using test::with;

Client client_of(const std::vector<std::string>& urls) {
  return test::client_of(urls, 1000ms);  // generous: a loaded 2-core machine
}

long long integer_of(const test::ReplyPtr& r) {
  return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
}

// How many connections are subscribed to `channel` (PUBSUB NUMSUB).
long long subscribers(const RedisServer& server, const std::string& channel) {
  auto r = server.command({"PUBSUB", "NUMSUB", channel});
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return -1;
  return r->element[1]->integer;
}

// The ids of the server's pub/sub clients (CLIENT LIST TYPE pubsub): a subscriber that was
// dropped and came back has a new one.
std::set<std::string> pubsub_clients(const RedisServer& server) {
  std::set<std::string> ids;
  auto r = server.command({"CLIENT", "LIST", "TYPE", "pubsub"});
  if (!r || r->type != REDIS_REPLY_STRING) return ids;
  const std::string text(r->str, r->len);
  for (auto at = text.find("id="); at != std::string::npos; at = text.find("\nid=", at + 1)) {
    const auto from = text.find('=', at) + 1;
    ids.insert(text.substr(from, text.find(' ', from) - from));
  }
  return ids;
}

long long commands_processed(const RedisServer& server) {
  return std::atoll(info_field(server, "stats", "total_commands_processed").c_str());
}

// Every key on the server, sorted.
std::set<std::string> keys_of(const RedisServer& server) {
  std::set<std::string> out;
  auto r = server.command({"KEYS", "*"});
  if (!r || r->type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i < r->elements; ++i) out.insert(r->element[i]->str);
  return out;
}

std::string url_as(const RedisServer& server, const std::string& user, const std::string& pw) {
  return "redis://" + user + ":" + pw + "@127.0.0.1:" + std::to_string(server.port());
}

// A waiter on another thread: lock(name, wait) with its own client; the future holds how long
// after `released` (set by the test) it got the lock, or the error.
struct Waiting {
  std::atomic<Clock::time_point::rep> released{0};
  std::future<Result<std::chrono::milliseconds>> result;
};

void start_waiter(Waiting& w, Client& client, const std::string& name,
                  std::chrono::milliseconds wait) {
  w.result = std::async(std::launch::async, [&w, &client, name, wait]() {
    auto lease = client.lock(name, wait, fixed(5s, "waiter"));
    if (!lease) return Result<std::chrono::milliseconds>(lease.error());
    const auto at = Clock::now();
    const Clock::time_point released{Clock::duration(w.released.load())};
    (void)lease->unlock();
    return Result<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(at - released));
  });
}

void mark_released(Waiting& w) {
  w.released.store(Clock::now().time_since_epoch().count());
}

// start_waiter, then true once the waiter has subscribed to `name`'s release channel.
bool start_subscribed_waiter(Waiting& w, Client& waiter, const RedisServer& server,
                             const std::string& name, std::chrono::milliseconds wait) {
  start_waiter(w, waiter, name, wait);
  return eventually([&] { return subscribers(server, lock::release_channel(name)) == 1; });
}

// True once the one subscriber to `channel` is another connection than those in `before`: the
// waiter subscribed again after its subscriber was dropped.
bool subscribed_again(const RedisServer& server, const std::set<std::string>& before,
                      const std::string& channel) {
  return eventually(
      [&] {
        const auto now = pubsub_clients(server);
        return now.size() == 1 && now != before && subscribers(server, channel) == 1;
      },
      5s);
}

// The holder releases: the waiter gets the lock soon after, woken by the release (its lease's
// ttl is far longer).
void release_and_expect_woken(Waiting& w, Lease& lease) {
  mark_released(w);
  auto released = lease.unlock();
  ASSERT_TRUE(released) << released.error().message();
  auto waited = w.result.get();
  ASSERT_TRUE(waited) << waited.error().message();
  EXPECT_LT(*waited, 3000ms) << "woken by the holder's ttl, not by the release";
}

// ---------------------------------------------------------------------------------------------
// 1. `timeout 1`: the server closes connections idle for more than a second (pub/sub ones are
// exempt). A holder without a watchdog that stays idle longer, then extends and unlocks.

TEST(ManagedTimeoutTest, AnIdleHolderExtendsAndUnlocksAfterTheServerClosedItsConnections) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(with({"--timeout", "1"}));
  Client client = client_of({server.url()});
  auto lease = client.try_lock("job", fixed(20s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  // Only the fixture's own connection is left once the server closed the client's.
  ASSERT_TRUE(
      eventually([&] { return info_field(server, "clients", "connected_clients") == "1"; }, 6s));
  auto extended = lease->extend(20s);
  ASSERT_TRUE(extended) << extended.error().message();
  EXPECT_GT(integer_of(server.command({"PTTL", "job"})), 15000);
  ASSERT_TRUE(
      eventually([&] { return info_field(server, "clients", "connected_clients") == "1"; }, 6s));
  auto released = lease->unlock();
  ASSERT_TRUE(released) << released.error().message();
  EXPECT_FALSE(server.exists("job")) << "unlock reported a release that did not happen";
}

// A watchdog that renews less often than the timeout finds its connection closed before every
// renewal: it reconnects (and greets again) and the lease stays held.
// The same over TLS, the norm on managed services: a TLS connection always reads, so it sees
// the server's close at once and fails there, keeping its epoch until the next request remakes
// it; that request's answer then came on an epoch never greeted and did not count (found in
// review: every other call failed, an extension that ran reported failed).
TEST(ManagedTimeoutTest, AnIdleTlsHolderLocksExtendsAndUnlocksAfterTheServerClosedIt) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  char pattern[] = "/tmp/dlock-managed-tls-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(pattern);
  const std::string make =
      "set -e; cd '" + dir.string() +
      "'; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key "
      "-out ca.crt -days 2 -subj '/CN=dlock test CA' 2>/dev/null; "
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.cnf; "
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key "
      "-out server.csr -subj '/CN=127.0.0.1' 2>/dev/null; "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
      "-out server.crt -days 2 -extfile san.cnf 2>/dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0);
  ServerOptions o = with({"--timeout", "1"});
  o.tls = true;
  o.tls_dir = dir;
  {
    RedisServer server(o);
    ClientOptions options;
    options.nodes = {server.url()};
    options.node_timeout = 1000ms;
    options.tls.ca_file = (dir / "ca.crt").string();
    auto client = Client::create(options);
    ASSERT_TRUE(client) << client.error().message();
    auto lease = client->try_lock("job", fixed(30s, "holder"));
    ASSERT_TRUE(lease) << lease.error().message();
    std::this_thread::sleep_for(3s);  // the server closes connections idle for 1 s
    auto other = client->try_lock("other", fixed(30s, "holder"));
    ASSERT_TRUE(other) << other.error().message();
    ASSERT_TRUE(other->unlock());
    std::this_thread::sleep_for(3s);
    auto extended = lease->extend();
    ASSERT_TRUE(extended) << extended.error().message();
    auto released = lease->unlock();
    ASSERT_TRUE(released) << released.error().message();
    auto status = client->status("job");  // (the fixture's own connection is closed too)
    ASSERT_TRUE(status) << status.error().message();
    EXPECT_FALSE(status->held);
  }
  std::filesystem::remove_all(dir);
}

TEST(ManagedTimeoutTest, AWatchdogRenewingLessOftenThanTheTimeoutKeepsTheLock) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(with({"--timeout", "1"}));
  Client client = client_of({server.url()});
  std::atomic<bool> lost{false};
  LockOptions o;
  o.ttl = 6000ms;
  o.renew_every = 2500ms;
  o.on_lost = [&](const Error&) { lost = true; };
  auto lease = client.try_lock("job", o);
  ASSERT_TRUE(lease) << lease.error().message();
  const auto until = Clock::now() + 8s;
  while (Clock::now() < until && !lost) std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(lost);
  EXPECT_TRUE(lease->is_held());
  EXPECT_GT(integer_of(server.command({"PTTL", "job"})), 2000);
  auto released = lease->unlock();
  ASSERT_TRUE(released) << released.error().message();
  EXPECT_FALSE(server.exists("job"));
}

// Redis exempts subscribers from the timeout: a waiter idle on its subscription for longer is
// still subscribed and woken by the release of a holder whose connection was closed meanwhile.
TEST(ManagedTimeoutTest, AWaiterSubscribedLongerThanTheTimeoutIsWokenByTheRelease) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(with({"--timeout", "1"}));
  Client holder = client_of({server.url()});
  Client waiter = client_of({server.url()});
  auto lease = holder.try_lock("job", fixed(30s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  Waiting w;
  ASSERT_TRUE(start_subscribed_waiter(w, waiter, server, "job", 20s));
  const std::string channel = lock::release_channel("job");
  std::this_thread::sleep_for(3s);  // holder and waiter idle past the timeout
  EXPECT_EQ(subscribers(server, channel), 1) << "the server closed an idle subscriber";
  release_and_expect_woken(w, *lease);
}

// ---------------------------------------------------------------------------------------------
// 2. The waiters' subscriber connection killed (CLIENT KILL TYPE pubsub, or the server's
// client-output-buffer-limit for pubsub clients): they subscribe again, are woken by the next
// release, and do not spin meanwhile.

TEST(ManagedPubsubTest, AWaiterWhoseSubscriberIsKilledSubscribesAgainAndIsWoken) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client holder = client_of({server.url()});
  Client waiter = client_of({server.url()});
  auto lease = holder.try_lock("job", fixed(30s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  Waiting w;
  ASSERT_TRUE(start_subscribed_waiter(w, waiter, server, "job", 20s));
  const std::string channel = lock::release_channel("job");
  for (int kill = 0; kill < 3; ++kill) {
    const auto before = pubsub_clients(server);
    ASSERT_GE(integer_of(server.command({"CLIENT", "KILL", "TYPE", "pubsub"})), 1);
    ASSERT_TRUE(subscribed_again(server, before, channel)) << "the waiter never subscribed again";
  }
  // No spinning while it waits: a second of waiting costs a few commands at most.
  const long long before = commands_processed(server);
  std::this_thread::sleep_for(1s);
  EXPECT_LT(commands_processed(server) - before, 20);
  release_and_expect_woken(w, *lease);
}

TEST(ManagedPubsubTest, AWaiterDroppedForItsOutputBufferSubscribesAgainAndIsWoken) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(with({"--client-output-buffer-limit", "pubsub 1024 1024 0"}));
  Client holder = client_of({server.url()});
  Client waiter = client_of({server.url()});
  auto lease = holder.try_lock("job", fixed(30s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  Waiting w;
  ASSERT_TRUE(start_subscribed_waiter(w, waiter, server, "job", 20s));
  const std::string channel = lock::release_channel("job");
  const auto before = pubsub_clients(server);
  ASSERT_EQ(before.size(), 1u);
  // One message larger than the limit: the server drops the subscriber.
  const std::string big(256 * 1024, 'x');
  ASSERT_EQ(integer_of(server.command({"PUBLISH", channel, big})), 1);
  ASSERT_TRUE(subscribed_again(server, before, channel))
      << "the waiter was not dropped, or never subscribed again";
  release_and_expect_woken(w, *lease);
}

// The release happens while the waiter's subscriber is down (its reconnection refused for a
// moment): the message is lost. The waiter must not sleep for the holder's whole ttl (30 s
// here) with the lock free: subscribed again, it tries again.
TEST(ManagedPubsubTest, AReleaseMissedWhileTheSubscriberWasDownDoesNotStrandTheWaiter) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  ASSERT_TRUE(server.command({"ACL", "SETUSER", "w", "on", ">pw", "~*", "&*", "+@all"}));
  Client holder = client_of({server.url()});
  Client waiter = client_of({url_as(server, "w", "pw")});
  auto lease = holder.try_lock("job", fixed(30s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  Waiting w;
  ASSERT_TRUE(start_subscribed_waiter(w, waiter, server, "job", 25s));
  const std::string channel = lock::release_channel("job");
  // The waiter's user is turned off: its subscriber's reconnections fail (AUTH) meanwhile.
  ASSERT_TRUE(server.command({"ACL", "SETUSER", "w", "off"}));
  ASSERT_GE(integer_of(server.command({"CLIENT", "KILL", "TYPE", "pubsub"})), 1);
  mark_released(w);
  auto released = lease->unlock();
  ASSERT_TRUE(released) << released.error().message();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(subscribers(server, channel), 0);
  ASSERT_TRUE(server.command({"ACL", "SETUSER", "w", "on"}));
  auto waited = w.result.get();
  ASSERT_TRUE(waited) << waited.error().message();
  EXPECT_LT(*waited, 5000ms) << "the waiter slept through a free lock until the holder's ttl";
}

// ---------------------------------------------------------------------------------------------
// 5. maxmemory reached under noeviction: acquisitions fail with the server's OOM error and
// write nothing; held locks are released and extended.

ServerOptions small_memory() {
  return with({"--maxmemory-policy", "noeviction"});
}

// Fills the server, then lowers maxmemory below what it uses: every write that may take memory
// is refused from now on (a full server, without a race against freed query buffers).
void fill(RedisServer& server) {
  const std::string value(64 * 1024, 'v');
  for (int i = 0; i < 16; ++i) server.command({"SET", "filler:" + std::to_string(i), value});
  ASSERT_TRUE(server.command({"CONFIG", "SET", "maxmemory", "1mb"}));
  auto refused = server.command({"SET", "probe", "x"});
  ASSERT_TRUE(refused && refused->type == REDIS_REPLY_ERROR) << "memory is not full";
}

// Each acquisition is either refused with the server's OOM error and writes nothing, or
// granted and then released without a trace: never a lock or a queue entry left behind.
TEST(ManagedOomTest, AcquisitionsFailClearlyAndWriteNothingReleasesWork) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(small_memory());
  Client client = client_of({server.url()});
  auto held = client.try_lock("held", fixed(20s, "holder"));
  ASSERT_TRUE(held) << held.error().message();
  fill(server);
  const auto before = keys_of(server);
  auto check = [&](const char* what, Result<Lease> r) {
    if (r) {
      EXPECT_TRUE(r->unlock()) << what;
    } else {
      EXPECT_NE(r.error().message().find("OOM"), std::string::npos)
          << what << ": " << r.error().message();
    }
    // A name's fencing counter stays after a grant, by design, until its ttl.
    for (const auto& key : keys_of(server)) {
      if (before.count(key) != 0) continue;
      EXPECT_EQ(key, lock::fence_key("job")) << what << " left behind " << key;
      EXPECT_GT(integer_of(server.command({"PTTL", key})), 0) << key;
    }
    std::cout << what << ": " << (r ? "granted, released" : r.error().message()) << "\n";
  };
  check("plain", client.try_lock("job", fixed(20s, "other")));
  LockOptions fair = fixed(20s, "fair");
  fair.fair = true;
  check("fair", client.try_lock("job", fair));
  check("shared", client.try_lock_shared("job", fixed(20s, "reader")));
  // A client that greets the full server for the first time.
  Client fresh = client_of({server.url()});
  check("fresh client", fresh.try_lock("job", fixed(20s, "fresh")));
  auto released = held->unlock();
  ASSERT_TRUE(released) << released.error().message();
  EXPECT_FALSE(server.exists("held"));
}

// A name held by another owner is refused as held on a full server when the server runs the
// checked script text (no shebang: a server not known to say replica-read-only yes; the
// shebang text is refused up front with OOM, held name or not). acquire.lua's fast path wrote
// its SET NX by redis.call, which a full server refuses with OOM before it looks at the key,
// so a waiter got an OOM error where the general path answers held (found in review,
// 2026-11-29).
TEST(ManagedOomTest, AHeldNameIsRefusedAsHeldOnAFullServerWithTheCheckedText) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(with({"--maxmemory-policy", "noeviction", "--replica-read-only", "no"}));
  Client client = client_of({server.url()});
  auto held = client.try_lock("held", fixed(20s, "holder"));
  ASSERT_TRUE(held) << held.error().message();
  fill(server);
  Client other = client_of({server.url()});
  auto refused = other.try_lock("held", fixed(20s, "other"));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), make_error_code(errc::lock_held)) << refused.error().message();
  EXPECT_TRUE(held->unlock());
}

TEST(ManagedOomTest, HeldLocksAreExtendedAndRenewedWhileMemoryIsFull) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(small_memory());
  Client client = client_of({server.url()});
  auto fixed_lease = client.try_lock("fixed", fixed(4s, "holder"));
  ASSERT_TRUE(fixed_lease) << fixed_lease.error().message();
  std::atomic<bool> lost{false};
  LockOptions renewed;
  renewed.ttl = 1500ms;
  renewed.on_lost = [&](const Error&) { lost = true; };
  auto watched = client.try_lock("watched", renewed);
  ASSERT_TRUE(watched) << watched.error().message();
  // A read hold, alone in its client's renewal batch.
  Client readers = client_of({server.url()});
  auto reading = readers.try_lock_shared("reading", renewed);
  ASSERT_TRUE(reading) << reading.error().message();
  fill(server);
  // Extended again and again, past twice its ttl, on the full server.
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(1500ms);
    auto extended = fixed_lease->extend();
    ASSERT_TRUE(extended) << "extension " << i << ": " << extended.error().message();
  }
  EXPECT_FALSE(lost) << "the watchdog lost its lock on the full server";
  EXPECT_TRUE(watched->is_held());
  EXPECT_TRUE(reading->is_held());
  EXPECT_TRUE(fixed_lease->unlock());
  EXPECT_TRUE(watched->unlock());
  EXPECT_TRUE(reading->unlock());
  EXPECT_FALSE(server.exists(lock::readers_key("reading")));
  EXPECT_FALSE(server.exists("fixed"));
  EXPECT_FALSE(server.exists("watched"));
}

// ---------------------------------------------------------------------------------------------
// 4. ACL users restricted to key patterns and channels.

// A rolling upgrade: dlock before 0.2 writes dlock:max-ttl as a string, which a renewal
// (max_ttl_raise.lua) replaces with the record of today. Its read of an entry for a full
// server's sake (zscore) must not fail on the string first (found in review: WRONGTYPE, every
// extension on that node reported failed while an old client kept writing the string).
TEST(ManagedUpgradeTest, AnExtensionReplacesAnOlderDlocksStringRecord) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  Client client = client_of({server.url()});
  auto lease = client.try_lock("job", fixed(10s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(server.command({"SET", lock::kMaxTtlKey, "10000"}));  // an older client's grant
  auto extended = lease->extend();
  ASSERT_TRUE(extended) << extended.error().message();
  auto type = server.command({"TYPE", lock::kMaxTtlKey});
  ASSERT_TRUE(type);
  EXPECT_EQ(std::string(type->str, type->len), "zset");
  EXPECT_TRUE(lease->unlock());
}

// An older dlock's string record says that leases of its ttl may live here. Each of the three
// scripts that replace it with today's zset (a greeting's hello.lua, a grant's acquire.lua, a
// renewal's max_ttl_raise.lua) must keep that ttl for as long as such a lease may live, key and
// entry alike. Found in review: the greeting kept the entry but set the new key to expire
// after two of its own ttls (a key without an expiry read as "too short"), and a grant or a
// renewal dropped the value: the 7-day ttl was forgotten within seconds, and with it the
// quarantine of a node that restarts meanwhile.
class ManagedUpgradeRecordTest : public ::testing::Test {
 protected:
  static constexpr long long kOldTtl = 7LL * 24 * 3600 * 1000;  // an older client's -t 168h

  // The older client's record, written as it wrote it.
  void write_old_record() {
    ASSERT_TRUE(server.command({"SET", lock::kMaxTtlKey, std::to_string(kOldTtl)}));
  }
  // Today's record keeps the older ttl, and lives about as long as a lease of it may.
  void expect_old_ttl_kept(const std::string& by) {
    auto score = server.command({"ZSCORE", lock::kMaxTtlKey, std::to_string(kOldTtl)});
    EXPECT_TRUE(score && score->type == REDIS_REPLY_STRING)
        << by << " dropped the older dlock's ttl from the record";
    const long long left = integer_of(server.command({"PTTL", lock::kMaxTtlKey}));
    EXPECT_TRUE(left == -1 || left > kOldTtl - 60'000)
        << by << " left the record " << left << " ms to live, with a " << kOldTtl
        << " ms lease possibly still held";
  }

  RedisServer server;
};

TEST_F(ManagedUpgradeRecordTest, AGreetingKeepsTheOlderTtlAsLongAsItsLeasesMayLive) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  write_old_record();  // a node no client of today's greeted yet
  Client first = client_of({server.url()});
  auto lease = first.try_lock("job", fixed(10s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  expect_old_ttl_kept("the first greeting");
  write_old_record();  // a node in use: another client's greeting replaces it
  Client second = client_of({server.url()});
  auto other = second.try_lock("other", fixed(10s, "holder"));
  ASSERT_TRUE(other) << other.error().message();
  expect_old_ttl_kept("a greeting of a node in use");
}

TEST_F(ManagedUpgradeRecordTest, AGrantKeepsTheOlderTtlAsLongAsItsLeasesMayLive) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  Client client = client_of({server.url()});
  auto first = client.try_lock("first", fixed(10s, "holder"));  // greeted: no string to replace
  ASSERT_TRUE(first) << first.error().message();
  // An older client's grant, after the greeting (by hand over today's record: an older client
  // writes its string only where no record is, its GET of a zset fails).
  write_old_record();
  // A ttl the first grant's record window does not cover: this grant checks the record
  // (node/record_window.h).
  auto lease = client.try_lock("job", fixed(12s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  expect_old_ttl_kept("the grant");
}

TEST_F(ManagedUpgradeRecordTest, ARenewalKeepsTheOlderTtlAsLongAsItsLeasesMayLive) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  Client client = client_of({server.url()});
  auto lease = client.try_lock("job", fixed(10s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  write_old_record();
  auto extended = lease->extend();
  ASSERT_TRUE(extended) << extended.error().message();
  expect_old_ttl_kept("the renewal");
}

// A record that never expires (one converted by the greeting of a dlock before this fix, or
// made so by hand) is not given an expiry shorter than its entries by a grant of a ttl new to
// it (record_ttl) or by a renewal (max_ttl_raise.lua): each set one of two of its own ttls
// where it found none.
TEST_F(ManagedUpgradeRecordTest, ARecordThatNeverExpiresIsNotCutShort) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  Client client = client_of({server.url()});
  auto first = client.try_lock("first", fixed(10s, "holder"));  // greeted, 10 s recorded
  ASSERT_TRUE(first) << first.error().message();
  auto time = server.command({"TIME"});
  ASSERT_TRUE(time && time->type == REDIS_REPLY_ARRAY && time->elements == 2);
  const long long now_ms = std::stoll(time->element[0]->str) * 1000;
  ASSERT_TRUE(server.command(
      {"ZADD", lock::kMaxTtlKey, std::to_string(now_ms + kOldTtl), std::to_string(kOldTtl)}));
  ASSERT_EQ(integer_of(server.command({"PERSIST", lock::kMaxTtlKey})), 1);
  auto lease = client.try_lock("job", fixed(12s, "holder"));  // a ttl the record lacks
  ASSERT_TRUE(lease) << lease.error().message();
  expect_old_ttl_kept("the grant");
  auto extended = lease->extend();
  ASSERT_TRUE(extended) << extended.error().message();
  expect_old_ttl_kept("the renewal");
}

TEST(ManagedAclTest, AUserLimitedToItsAppKeysIsToldWhatDlockNeedsAndNothingIsWritten) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  ASSERT_TRUE(server.command({"ACL", "SETUSER", "app", "on", ">pw", "~app:*", "&*", "+@all"}));
  Client client = client_of({url_as(server, "app", "pw")});
  auto lease = client.try_lock("app:job", fixed(10s, "x"));
  ASSERT_FALSE(lease) << "locked without access to dlock's own keys";
  const std::string message = lease.error().message();
  EXPECT_NE(message.find("NOPERM"), std::string::npos) << message;
  EXPECT_NE(message.find("~dlock:*"), std::string::npos) << message;
  EXPECT_TRUE(keys_of(server).empty()) << "a refused acquisition left keys behind";
}

// Redis 7 gives a new ACL user no pub/sub channel (acl-pubsub-default resetchannels): the
// release's PUBLISH is refused inside the script.
TEST(ManagedAclTest, AUserWithoutChannelsNeverGetsAReleaseWrong) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  ASSERT_TRUE(server.command({"ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all"}));
  Client client = client_of({url_as(server, "app", "pw")});
  // release.lua: the lock is freed, and so reported, though its PUBLISH is refused.
  auto lease = client.try_lock("job", fixed(10s, "x"));
  ASSERT_TRUE(lease) << lease.error().message();
  auto released = lease->unlock();
  ASSERT_TRUE(released) << "a release that happened was reported failed: "
                        << released.error().message();
  EXPECT_FALSE(server.exists("job")) << "a release reported that did not happen";
  // fair_leave.lua: a fair waiter that gives up leaves the queue, its PUBLISH refused.
  LockOptions fair = fixed(10s, "holder");
  fair.fair = true;
  auto holder = client.try_lock("fair-job", fair);
  ASSERT_TRUE(holder) << holder.error().message();
  LockOptions waiting = fixed(10s, "waiter");
  waiting.fair = true;
  auto gave_up = client.lock("fair-job", 300ms, waiting);
  ASSERT_FALSE(gave_up);
  EXPECT_TRUE(gave_up.error().is(errc::wait_timeout)) << gave_up.error().message();
  EXPECT_FALSE(server.exists(lock::queue_key("fair-job"))) << "the waiter stayed in the queue";
  // force_release.lua: deleted, and so reported, though its PUBLISH is refused.
  auto forced = client.force_release("fair-job");
  ASSERT_TRUE(forced) << forced.error().message();
  EXPECT_FALSE(server.exists("fair-job"));
}

// What docs/safety.md tells operators to grant: dlock's keys and channels, the lock names, and
// the commands (INFO among them) without the rest of @dangerous.
TEST(ManagedAclTest, TheDocumentedUserLocksWaitsAndReleases) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  ASSERT_TRUE(server.command({"ACL", "SETUSER", "app", "on", ">pw", "~app:*", "~dlock:*",
                              "&dlock:*", "+@all", "-@dangerous", "+info"}));
  Client holder = client_of({url_as(server, "app", "pw")});
  Client waiter = client_of({url_as(server, "app", "pw")});
  auto lease = holder.try_lock("app:job", fixed(20s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  Waiting w;
  ASSERT_TRUE(start_subscribed_waiter(w, waiter, server, "app:job", 15s));
  auto extended = lease->extend();
  ASSERT_TRUE(extended) << extended.error().message();
  release_and_expect_woken(w, *lease);
}

// ---------------------------------------------------------------------------------------------
// 3. Admin commands renamed away or denied.

TEST(ManagedCommandsTest, RenamedAdminCommandsAreNotNeeded) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server(with({"--rename-command", "CONFIG", "", "--rename-command", "CLIENT", "",
                           "--rename-command", "SCRIPT", "", "--rename-command", "KEYS", "",
                           "--rename-command", "FLUSHALL", "", "--rename-command", "DEBUG", ""}));
  Client holder = client_of({server.url()});
  Client waiter = client_of({server.url()});
  auto lease = holder.try_lock("job", fixed(20s, "holder"));
  ASSERT_TRUE(lease) << lease.error().message();
  Waiting w;
  ASSERT_TRUE(start_subscribed_waiter(w, waiter, server, "job", 15s));
  ASSERT_TRUE(lease->extend());
  mark_released(w);
  ASSERT_TRUE(lease->unlock());
  auto waited = w.result.get();
  ASSERT_TRUE(waited) << waited.error().message();
  EXPECT_FALSE(server.exists("job"));
}

// Some services let scripts run only through EVAL (SCRIPT and EVALSHA denied).
TEST(ManagedCommandsTest, ScriptsRunByEvalWhenEvalshaAndScriptAreDenied) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  ASSERT_TRUE(server.command(
      {"ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-script", "-evalsha"}));
  Client client = client_of({url_as(server, "app", "pw")});
  auto lease = client.try_lock("job", fixed(10s, "x"));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->extend());
  auto released = lease->unlock();
  ASSERT_TRUE(released) << released.error().message();
  EXPECT_FALSE(server.exists("job"));
}

// INFO is in @dangerous: a user with "+@all -@dangerous" cannot read it, and dlock needs it
// (restarts, replicas, eviction policy). The error says so.
TEST(ManagedCommandsTest, ADeniedInfoIsNamedInTheError) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer server;
  ASSERT_TRUE(
      server.command({"ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-@dangerous"}));
  Client client = client_of({url_as(server, "app", "pw")});
  auto lease = client.try_lock("job", fixed(10s, "x"));
  ASSERT_FALSE(lease) << "locked without knowing the node";
  const std::string message = lease.error().message();
  EXPECT_NE(message.find("INFO"), std::string::npos) << message;
  EXPECT_NE(message.find("NOPERM"), std::string::npos) << message;
  for (const auto& key : keys_of(server)) {
    EXPECT_TRUE(key == "dlock:max-ttl" || key == "dlock:fence-floor") << "left behind: " << key;
  }
}

// ---------------------------------------------------------------------------------------------
// 6. A replica (read-only, Redis's default) given as a node.

TEST(ManagedReplicaTest, AReadOnlyReplicaIsRefusedClearlyAndNeverCounted) {
  DLOCK_REQUIRE_REDIS_OR_SKIP();
  RedisServer master(quick_master());
  RedisServer replica(replica_of(master));
  ASSERT_TRUE(eventually([&] { return in_sync(replica); }));
  Client alone = client_of({replica.url()});
  auto lease = alone.try_lock("job", fixed(5s, "x"));
  ASSERT_FALSE(lease);
  EXPECT_NE(lease.error().message().find("replica"), std::string::npos) << lease.error().message();
  // Beside two masters, the replica (of the first) is one vote that never counts: the lock
  // needs both masters.
  RedisServer other;
  ClientOptions options;
  options.nodes = {master.url(), replica.url(), other.url()};
  options.node_timeout = 1000ms;
  options.start_from_quorum = true;  // a brand-new set would wait for the replica's vote
  auto three = Client::create(options);
  ASSERT_TRUE(three) << three.error().message();
  auto held = three->try_lock("job", fixed(5s, "x"));
  ASSERT_TRUE(held) << held.error().message();
  other.pause();
  auto second = three->try_lock("job2", fixed(5s, "y"));
  other.resume();
  ASSERT_FALSE(second) << "a replica's vote was counted";
  EXPECT_NE(second.error().message().find("replica"), std::string::npos)
      << second.error().message();
  EXPECT_TRUE(held->unlock());
  EXPECT_FALSE(master.exists("job"));
}

}  // namespace
}  // namespace dlock

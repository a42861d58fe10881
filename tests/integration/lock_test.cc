// SPDX-License-Identifier: MIT
// The lock on one real redis-server: ownership, expiry, validity, bad input, coexistence with
// other libraries' locks, reconnection and the script cache.
#include <dlock/dlock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "lock/keys.h"
#include "scripts/script.h"
#include "support/lock_key.h"
#include "support/redis_server.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;

class LockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    server_ = std::make_unique<RedisServer>();
  }
  Client make_client(ClientOptions options = {}) {
    if (options.nodes.empty()) options.nodes = {server_->url()};
    auto c = Client::create(options);
    EXPECT_TRUE(c) << c.error().message();
    return std::move(c).value();
  }
  LockOptions ttl(std::chrono::milliseconds t, std::string owner = {}) {
    LockOptions o;
    o.ttl = t;
    if (!owner.empty()) o.owner = OwnerToken(owner);
    return o;
  }
  // An explicit lease: not renewed, it ends after `t`.
  LockOptions lease(std::chrono::milliseconds t, std::string owner = {}) {
    LockOptions o = ttl(t, std::move(owner));
    o.auto_renew = false;
    return o;
  }
  std::unique_ptr<RedisServer> server_;
};

TEST_F(LockTest, AcquireAndRelease) {
  Client client = make_client();
  auto lease = client.try_lock("job", ttl(10s));
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_TRUE(lease->is_held());
  EXPECT_TRUE(server_->exists("job"));
  ASSERT_TRUE(lease->unlock());
  EXPECT_FALSE(lease->is_held());
  EXPECT_FALSE(server_->exists("job"));
}

TEST_F(LockTest, SecondOwnerIsRefusedWhileHeld) {
  Client client = make_client();
  auto a = client.try_lock("job", ttl(10s, "a"));
  ASSERT_TRUE(a);
  auto b = client.try_lock("job", ttl(10s, "b"));
  ASSERT_FALSE(b);
  EXPECT_TRUE(b.error().is(errc::lock_held)) << b.error().message();
  EXPECT_NE(b.error().message().find(server_->url()), std::string::npos) << b.error().message();
}

// The refusal itself says how long the holder has left (Error::holder_ttl): a try, and a wait
// that ran out; nothing for a key that never expires.
TEST_F(LockTest, ARefusalSaysHowLongTheHolderHasLeft) {
  Client client = make_client();
  auto a = client.try_lock("job", lease(10s, "a"));
  ASSERT_TRUE(a) << a.error().message();
  auto tried = client.try_lock("job", ttl(10s, "b"));
  ASSERT_FALSE(tried);
  ASSERT_TRUE(tried.error().is(errc::lock_held)) << tried.error().message();
  ASSERT_TRUE(tried.error().holder_ttl().has_value());
  EXPECT_GT(*tried.error().holder_ttl(), 5s);  // 10 s less the time gone (generous)
  EXPECT_LE(*tried.error().holder_ttl(), 10s);

  auto waited = client.lock("job", 200ms, ttl(10s, "b"));
  ASSERT_FALSE(waited);
  ASSERT_TRUE(waited.error().is(errc::wait_timeout)) << waited.error().message();
  ASSERT_TRUE(waited.error().holder_ttl().has_value());
  EXPECT_GT(*waited.error().holder_ttl(), 5s);
  EXPECT_LE(*waited.error().holder_ttl(), 10s);

  server_->command({"SET", "foreign", "x"});  // another library's lock, no ttl
  auto foreign = client.try_lock("foreign", ttl(10s, "b"));
  ASSERT_FALSE(foreign);
  EXPECT_TRUE(foreign.error().is(errc::lock_held));
  EXPECT_FALSE(foreign.error().holder_ttl().has_value());
}

// Names and owners may hold NUL bytes: ("a\0r\0b", write, owner "c") and ("a", read, owner
// "b\0w\0c") are two holds. Their bookkeeping keys once met, and the read "joined" the write's
// hold without ever reaching the nodes: another client could then take "a" for writing.
TEST_F(LockTest, NamesAndOwnersWithNulBytesAreTheirOwnHolds) {
  using namespace std::string_literals;
  Client client = make_client();
  auto write = client.try_lock("a\0r\0b"s, ttl(10s, "c"));
  ASSERT_TRUE(write) << write.error().message();
  auto read = client.try_lock_shared("a", ttl(10s, "b\0w\0c"s));
  ASSERT_TRUE(read) << read.error().message();
  Client other = make_client();
  auto writer = other.try_lock("a", ttl(10s, "d"));
  ASSERT_FALSE(writer) << "a write lock granted beside a read hold";
  EXPECT_TRUE(writer.error().is(errc::lock_held)) << writer.error().message();
}

TEST_F(LockTest, FencingTokenGrowsWithEachAcquisition) {
  Client client = make_client();
  FencingToken last;
  for (int i = 0; i < 5; ++i) {
    auto lease = client.try_lock("job", ttl(10s));
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_GT(lease->fencing_token(), last);
    last = lease->fencing_token();
  }
}

TEST_F(LockTest, OnlyTheOwnerReleases) {
  Client client = make_client();
  auto a = client.try_lock("job", ttl(10s, "owner-a"));
  ASSERT_TRUE(a);
  auto r = client.unlock("job", OwnerToken("intruder"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::not_owner)) << r.error().message();
  EXPECT_TRUE(server_->exists("job"));
  ASSERT_TRUE(client.unlock("job", OwnerToken("owner-a")));
  EXPECT_FALSE(server_->exists("job"));
}

TEST_F(LockTest, ExpiredLeaseCannotReleaseOrExtendTheNextHolder) {
  Client client = make_client();
  auto a = client.try_lock("job", lease(200ms, "a"));
  ASSERT_TRUE(a);
  ASSERT_TRUE(test::eventually([&] { return !server_->exists("job"); }));
  EXPECT_FALSE(a->is_held());
  auto b = client.try_lock("job", ttl(10s, "b"));
  ASSERT_TRUE(b) << b.error().message();

  auto ext = a->extend(30s);
  ASSERT_FALSE(ext);
  EXPECT_TRUE(ext.error().is(errc::lock_lost)) << ext.error().message();
  auto pttl = server_->command({"PTTL", "job"});
  EXPECT_LE(pttl->integer, 10000) << "a stale extend must not re-arm b's lock";

  auto rel = a->unlock();
  ASSERT_FALSE(rel);
  EXPECT_TRUE(rel.error().is(errc::lock_lost));
  EXPECT_TRUE(server_->exists("job")) << "a stale release must not free b's lock";
  // The key holds one hold (HLEN 1 of the hash it was), b's.
  const auto holder = test::lock_key_hold(*server_, "job");
  ASSERT_TRUE(holder) << "b's hold must still be there";
  EXPECT_EQ(holder->owner, "b") << "b's hold must still be there";
}

TEST_F(LockTest, ExtendReArmsTheTtl) {
  Client client = make_client();
  auto lease = client.try_lock("job", ttl(1s));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->extend(20s));
  auto pttl = server_->command({"PTTL", "job"});
  EXPECT_GT(pttl->integer, 10000);
  EXPECT_GT(lease->validity(), 10s);
}

TEST_F(LockTest, TtlHoldsAndThenTheLockCanBeTakenAgain) {
  Client client = make_client();
  const auto start = std::chrono::steady_clock::now();
  auto a = client.try_lock("job", lease(600ms, "a"));
  ASSERT_TRUE(a);
  auto pttl = server_->command({"PTTL", "job"});
  EXPECT_GT(pttl->integer, 0);
  EXPECT_LE(pttl->integer, 600);
  Result<Lease> b = Error(errc::lock_held, "not tried");
  ASSERT_TRUE(test::eventually([&] {
    b = client.try_lock("job", ttl(10s, "b"));
    return b.has_value();
  }));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 540ms) << "the lock was free again before its ttl ran out";
}

TEST_F(LockTest, ValidityIsTtlMinusElapsedMinusDrift) {
  ClientOptions options;
  options.drift_factor = 0.01;
  Client client = make_client(options);
  auto lease = client.try_lock("job", ttl(10s));
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_LE(lease->validity(), 10s - 102ms);
  EXPECT_GT(lease->validity(), 8s);
}

TEST_F(LockTest, SameThreadReentersAndFreesAtCountZero) {
  Client client = make_client();
  auto outer = client.try_lock("job", ttl(10s));
  ASSERT_TRUE(outer) << outer.error().message();
  auto inner = client.try_lock("job", ttl(10s));
  ASSERT_TRUE(inner) << inner.error().message();
  EXPECT_EQ(inner->fencing_token(), outer->fencing_token());
  ASSERT_TRUE(inner->unlock());
  EXPECT_TRUE(server_->exists("job"));
  ASSERT_TRUE(outer->unlock());
  EXPECT_FALSE(server_->exists("job"));
}

TEST_F(LockTest, LeaseDestructorReleases) {
  Client client = make_client();
  {
    auto lease = client.try_lock("job", ttl(10s));
    ASSERT_TRUE(lease) << lease.error().message();
    EXPECT_TRUE(server_->exists("job"));
  }
  EXPECT_FALSE(server_->exists("job"));
}

TEST_F(LockTest, PlainSetNxLockOfAnotherLibraryCountsAsHeldAndIsNeverTouched) {
  Client client = make_client();
  auto set = server_->command({"SET", "job", "other-lib-token", "NX", "PX", "10000"});
  ASSERT_EQ(set->type, REDIS_REPLY_STATUS);
  auto lease = client.try_lock("job", ttl(10s));
  ASSERT_FALSE(lease);
  EXPECT_TRUE(lease.error().is(errc::lock_held));
  EXPECT_FALSE(client.unlock("job", Client::default_owner()));
  EXPECT_FALSE(client.unlock("job", OwnerToken("other-lib-token")));
  auto value = server_->command({"GET", "job"});
  ASSERT_EQ(value->type, REDIS_REPLY_STRING);
  EXPECT_STREQ(value->str, "other-lib-token");
  auto pttl = server_->command({"PTTL", "job"});
  EXPECT_LE(pttl->integer, 10000);
  auto status = client.status("job");
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->held);
  EXPECT_EQ(status->nodes[0].kind, KeyKind::foreign);
}

// status() and force_release() report typed values: kinds and outcomes as enums, a ttl only
// when there is one, the fence as a FencingToken.
TEST_F(LockTest, StatusAndForcedReleaseReportTypedValues) {
  Client client = make_client();
  auto free = client.status("job");
  ASSERT_TRUE(free) << free.error().message();
  EXPECT_FALSE(free->held);
  EXPECT_EQ(free->nodes[0].kind, KeyKind::free);
  EXPECT_FALSE(free->nodes[0].ttl);
  EXPECT_EQ(free->nodes[0].fence, FencingToken(0));
  EXPECT_EQ(free->nodes[0].queued, 0u);
  EXPECT_EQ(free->nodes[0].quarantine, 0ms);

  auto lease = client.try_lock("job", ttl(10s, "typed-owner"));
  ASSERT_TRUE(lease) << lease.error().message();
  auto held = client.status("job");
  ASSERT_TRUE(held) << held.error().message();
  EXPECT_TRUE(held->held);
  const NodeLockState& n = held->nodes[0];
  EXPECT_EQ(n.kind, KeyKind::dlock);
  ASSERT_TRUE(n.ttl);
  EXPECT_GT(*n.ttl, 0ms);
  EXPECT_LE(*n.ttl, 10s);
  EXPECT_EQ(n.fence, lease->fencing_token());
  ASSERT_EQ(n.owners.size(), 1u);
  EXPECT_EQ(n.owners[0].owner, OwnerToken("typed-owner"));
  EXPECT_EQ(to_string(n.kind), "dlock");

  auto forced = client.force_release("job");
  ASSERT_TRUE(forced);
  ASSERT_EQ(forced->size(), 1u);
  EXPECT_FALSE((*forced)[0].error);
  EXPECT_EQ((*forced)[0].outcome, ForceOutcome::deleted);
  EXPECT_EQ(client.force_release("job")->at(0).outcome, ForceOutcome::free);

  // Another library's key that never expires: no ttl; kept unless asked, then deleted.
  server_->command({"SET", "job", "other-lib-token"});
  auto foreign = client.status("job");
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->nodes[0].kind, KeyKind::foreign);
  EXPECT_FALSE(foreign->nodes[0].ttl);
  EXPECT_EQ(client.force_release("job")->at(0).outcome, ForceOutcome::kept_foreign);
  EXPECT_EQ(client.force_release("job", true)->at(0).outcome, ForceOutcome::deleted_foreign);
  EXPECT_EQ(to_string(ForceOutcome::deleted_foreign), "deleted-foreign");
  EXPECT_FALSE(server_->exists("job"));
}

TEST_F(LockTest, StatusAndForceReleaseReportAnUnreachableNodeAsANodeError) {
  Client client = make_client();
  ASSERT_TRUE(client.status("job"));
  server_->kill9();
  auto status = client.status("job");
  ASSERT_TRUE(status) << status.error().message();
  const NodeLockState& n = status->nodes[0];
  ASSERT_TRUE(n.error);
  EXPECT_EQ(n.error->node, n.node);
  EXPECT_TRUE(n.error->code) << "no error code";
  EXPECT_FALSE(n.error->reason.empty());
  auto forced = client.force_release("job");
  ASSERT_TRUE(forced) << forced.error().message();
  const ForcedRelease& r = forced->at(0);
  EXPECT_FALSE(r.outcome);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->node, r.node);
  EXPECT_TRUE(r.error->code) << "no error code";
}

TEST_F(LockTest, RunsScriptsAgainAfterTheScriptCacheIsFlushed) {
  Client client = make_client();
  ASSERT_TRUE(client.try_lock("job", ttl(10s))->unlock());
  server_->command({"SCRIPT", "FLUSH"});
  auto lease = client.try_lock("job", ttl(10s));
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->unlock());
}

TEST_F(LockTest, EveryScriptLoadsWithTheShaWeCallItBy) {
  for (const scripts::Script* s : scripts::all()) {
    auto r = server_->command({"SCRIPT", "LOAD", std::string(s->source)});
    ASSERT_EQ(r->type, REDIS_REPLY_STRING) << s->name << ": " << (r->str ? r->str : "");
    EXPECT_EQ(std::string(r->str), s->sha1) << s->name;
    if (!s->has_unguarded()) continue;
    // Without the role check, and refused whole by a read-only replica (the shebang, without
    // a no-writes flag): docs/safety.md.
    EXPECT_EQ(s->unguarded_source.rfind("#!lua", 0), 0U) << s->name;
    EXPECT_EQ(s->unguarded_source.find("no-writes"), std::string::npos) << s->name;
    EXPECT_EQ(s->unguarded_source.find("'info', 'replication'"), std::string::npos) << s->name;
    EXPECT_NE(s->source.find("'info', 'replication'"), std::string::npos) << s->name;
    r = server_->command({"SCRIPT", "LOAD", s->unguarded_source});
    ASSERT_EQ(r->type, REDIS_REPLY_STRING) << s->name << " unguarded: " << (r->str ? r->str : "");
    EXPECT_EQ(std::string(r->str), s->unguarded_sha1) << s->name;
  }
}

// Lua makes every function of a script anew on each call (about an inner command's cost each):
// key_clock.lua's functions come after the fast paths of acquire and release (issue 32), once.
TEST(ScriptTextTest, KeyClockComesOnceAfterTheFastPathsOfAcquireAndRelease) {
  const std::pair<const scripts::Script*, std::string_view> fast_paths[] = {
      {&scripts::acquire(), "local fast_counted"},
      {&scripts::release(), "redis.pcall('get', KEYS[1]) == 'dlock. '"}};
  for (const auto& [script, fast_path] : fast_paths) {
    for (const std::string* text : {&script->source, &script->unguarded_source}) {
      const std::size_t fast = text->find(fast_path);
      const std::size_t clock = text->find("local function server_ms");
      ASSERT_NE(fast, std::string::npos) << script->name;
      ASSERT_NE(clock, std::string::npos) << script->name;
      EXPECT_LT(fast, clock) << script->name << ": a function made before the fast path";
      EXPECT_EQ(text->find("local function server_ms", clock + 1), std::string::npos)
          << script->name;
    }
  }
  // The others keep it first.
  EXPECT_LT(scripts::renew().source.find("local function server_ms"),
            scripts::renew().source.find("KEYS[1]"));
}

TEST_F(LockTest, ReconnectsAfterTheNodeRestarts) {
  ClientOptions options;
  options.reconnect_backoff_min = 20ms;
  options.reconnect_backoff_max = 200ms;
  Client client = make_client(options);
  ASSERT_TRUE(client.try_lock("job", ttl(10s))->unlock());
  server_->restart(/*keep_data=*/false);
  Result<Lease> lease = Error(errc::io_error, "not tried");
  ASSERT_TRUE(test::eventually([&] {
    lease = client.try_lock("job", ttl(10s));
    return lease.has_value();
  }));
  ASSERT_TRUE(lease->unlock());
}

TEST_F(LockTest, RejectsBadNamesAndTtls) {
  Client client = make_client();
  auto empty = client.try_lock("", ttl(10s));
  ASSERT_FALSE(empty);
  EXPECT_TRUE(empty.error().is(errc::invalid_argument));
  EXPECT_NE(empty.error().message().find("name"), std::string::npos);
  // dlock's own keys on the nodes (issue 32's review: a lock there made every grant on the node
  // fail), and a cluster slot's copies of them.
  for (const char* own : {"dlock:max-ttl", "dlock:fence-floor", "dlock:boots", "dlock:boots:{a}"}) {
    auto r = client.try_lock(own, ttl(10s));
    ASSERT_FALSE(r) << own;
    EXPECT_TRUE(r.error().is(errc::invalid_argument)) << r.error().message();
    auto forced = client.force_release(own, /*include_foreign=*/true);
    EXPECT_TRUE(!forced && forced.error().is(errc::invalid_argument)) << own;
  }
  // Another name's keys (review of issue 32: a grant of "job" on one node took its counter
  // dlock:fence:{job} away by GETDEL, a lock by that name with it: a second holder of it).
  for (const char* other : {"dlock:fence:{job}", "dlock:readers:{job}", "dlock:queue:{job}",
                            "dlock:queue-alive:{job}", "dlock:writers-waiting:{job}"}) {
    auto r = client.try_lock(other, ttl(10s));
    ASSERT_FALSE(r) << other;
    EXPECT_TRUE(r.error().is(errc::invalid_argument)) << r.error().message();
    EXPECT_FALSE(server_->exists(other)) << other;
  }
  for (auto bad : {0ms, -5ms, 1ms, 2ms}) {
    auto r = client.try_lock("job", ttl(bad));
    ASSERT_FALSE(r) << bad.count();
    EXPECT_TRUE(r.error().is(errc::invalid_argument)) << r.error().message();
    EXPECT_NE(r.error().message().find("ttl"), std::string::npos) << r.error().message();
  }
  auto neg_wait = client.lock("job", -1ms, ttl(10s));
  EXPECT_TRUE(!neg_wait && neg_wait.error().is(errc::invalid_argument));
  // A ttl beyond a year is refused before anything reaches a node (it would be recorded as the
  // set's largest ttl, and deadlines computed from it overflow).
  for (Millis huge : {Millis(std::chrono::hours(24 * 366)), Millis(std::chrono::hours::max())}) {
    auto r = client.try_lock("job", ttl(huge));
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().is(errc::invalid_argument)) << r.error().message();
  }
  EXPECT_FALSE(server_->exists("dlock:max-ttl")) << "a refused ttl was announced";
  // A wait "forever" is a wait, not an overflow.
  auto forever = client.lock("job", std::chrono::hours::max(), ttl(10s));
  ASSERT_TRUE(forever) << forever.error().message();
  EXPECT_TRUE(forever->unlock());
  LockOptions slow_retry = ttl(10s);
  slow_retry.retry_delay = std::chrono::hours(2);
  EXPECT_TRUE(client.try_lock("job", slow_retry).error().is(errc::invalid_argument));
  LockOptions o;
  o.owner = OwnerToken("");
  auto r = client.try_lock("job", o);
  EXPECT_TRUE(!r && r.error().is(errc::invalid_argument));
  EXPECT_FALSE(server_->exists("job")) << "nothing may be left locked behind an error";
}

TEST_F(LockTest, RejectsBadClientOptions) {
  auto none = Client::create({});
  ASSERT_FALSE(none);
  EXPECT_TRUE(none.error().is(errc::invalid_argument));
  EXPECT_NE(none.error().message().find("no Redis nodes"), std::string::npos);

  ClientOptions twice;
  twice.nodes = {server_->url(), "redis://localhost:" + std::to_string(server_->port())};
  auto dup = Client::create(twice);
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message().find("given twice"), std::string::npos);
  // An address in another of its forms is the same server too (it would vote twice).
  for (const std::string other : {"redis://127.1:", "redis://2130706433:", "redis://0x7f.0.0.1:"}) {
    ClientOptions same;
    same.nodes = {server_->url(), other + std::to_string(server_->port())};
    auto d = Client::create(same);
    ASSERT_FALSE(d) << other;
    EXPECT_NE(d.error().message().find("given twice"), std::string::npos) << other;
  }
  ClientOptions ipv6;
  ipv6.nodes = {"redis://[::1]:7000", "redis://[0:0:0:0:0:0:0:1]:7000"};
  auto d6 = Client::create(ipv6);
  ASSERT_FALSE(d6);
  EXPECT_NE(d6.error().message().find("given twice"), std::string::npos);

  ClientOptions malformed;
  malformed.nodes = {"redis//nope"};
  auto bad = Client::create(malformed);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("invalid node URL"), std::string::npos);

  ClientOptions zero_timeout;
  zero_timeout.nodes = {server_->url()};
  zero_timeout.node_timeout = 0ms;
  EXPECT_FALSE(Client::create(zero_timeout));
  ClientOptions huge_timeout;
  huge_timeout.nodes = {server_->url()};
  huge_timeout.node_timeout = std::chrono::hours::max();
  auto huge = Client::create(huge_timeout);
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message().find("node_timeout"), std::string::npos);
  ClientOptions bad_drift;
  bad_drift.nodes = {server_->url()};
  bad_drift.drift_factor = 1.5;
  EXPECT_FALSE(Client::create(bad_drift));
}

TEST_F(LockTest, UnreachableNodeIsNamedWithItsReason) {
  ClientOptions options;
  server_->kill9();
  options.nodes = {server_->url()};
  Client client = make_client(options);
  auto r = client.try_lock("job", ttl(10s));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::quorum_not_reached)) << r.error().message();
  ASSERT_EQ(r.error().nodes().size(), 1u);
  EXPECT_EQ(r.error().nodes()[0].node, server_->url());
  EXPECT_NE(r.error().message().find("refused"), std::string::npos) << r.error().message();
}

// A key of dlock's own (the max-ttl record, the fence floor, a name's counter, its readers) that
// something else wrote with another type: the grant is refused on that node with an error that
// says which kind of key to look at (the server's WRONGTYPE names only a line of a script), and
// the name is left free. Once the key is gone, the node grants again.
TEST_F(LockTest, AnOwnKeyOfAnotherTypeIsNamedAndLeavesNothingLocked) {
  Client client = make_client();
  ASSERT_TRUE(client.try_lock("warm-up", ttl(10s))->unlock());  // the node is greeted
  // Each attempt with a ttl larger than every grant before it: a grant's record window covers
  // only smaller ones (node/record_window.h), so every attempt reads dlock:max-ttl.
  auto attempt_ttl = 10s;
  for (const char* own :
       {"dlock:max-ttl", "dlock:fence-floor", "dlock:fence:{job}", "dlock:readers:{job}"}) {
    attempt_ttl += 1s;
    server_->command({"DEL", own});
    server_->command({"RPUSH", own, "not dlock's"});
    auto r = client.try_lock("job", ttl(attempt_ttl));
    ASSERT_FALSE(r) << own;
    ASSERT_EQ(r.error().nodes().size(), 1u) << r.error().message();
    const std::string& reason = r.error().nodes()[0].reason;
    EXPECT_NE(reason.find("WRONGTYPE"), std::string::npos) << own << ": " << reason;
    EXPECT_NE(reason.find("a key of dlock's (dlock:"), std::string::npos) << own << ": " << reason;
    EXPECT_NE(r.error().message().find("dlock:"), std::string::npos) << r.error().message();
    EXPECT_FALSE(server_->exists("job")) << own << ": the refused grant left its key behind";
    server_->command({"DEL", own});
    auto again = client.try_lock("job", ttl(attempt_ttl));
    ASSERT_TRUE(again) << own << ": " << again.error().message();
    EXPECT_TRUE(again->unlock());
  }
}

TEST_F(LockTest, ThreadsKeepANonAtomicCounterExact) {
  // A node timeout of seconds, not the default 200 ms: the test is about exclusion, and 8
  // threads on a loaded 2-core machine under ASan once waited longer than 200 ms for a reply
  // (2 failed calls in a full CI run).
  ClientOptions options;
  options.node_timeout = 2s;
  Client client = make_client(options);
  constexpr int kThreads = 8;
  constexpr int kRounds = 25;
  long counter = 0;  // deliberately not atomic: the lock is what protects it
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        auto lease = client.lock("counter", 60s, ttl(10s));
        if (!lease) {
          ADD_FAILURE() << "lock: " << lease.error().message();
          ++failures;
          continue;
        }
        if (inside.fetch_add(1) != 0) ++overlaps;
        long seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
        inside.fetch_sub(1);
        if (auto released = lease->unlock(); !released) {
          ADD_FAILURE() << "unlock: " << released.error().message();
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter, kThreads * kRounds);
}

}  // namespace
}  // namespace dlock

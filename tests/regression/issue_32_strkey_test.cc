// SPDX-License-Identifier: MIT
// Issue 32, the string lock key and the waiter flag (docs/protocol.md, "The lock key" and "The
// waiter flag"), on a real redis-server: a write hold is the string "dlock" F " " HOLD_ID " "
// OWNER that SET NX PX writes; a refusal by it sets F to '!', and only a flagged hold's release
// reads the fair queue and publishes. Mixed versions: an older dlock's hash hold and another
// library's string are held and never touched by any script of this version, and the older
// scripts (tests/regression/pre_strkey/, dlock at dc782f2) see a new hold as foreign: held,
// never touched. Never two holders in any mix.
#include <dlock/dlock.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "lock/calls.h"
#include "lock/keys.h"
#include "scripts/script.h"
#include "support/lock_key.h"
#include "support/redis_server.h"

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::RedisServer;
using Clock = std::chrono::steady_clock;

Client client_on(const RedisServer& server) {
  ClientOptions options;
  options.nodes = {server.url()};
  auto c = Client::create(options);
  EXPECT_TRUE(c) << c.error().message();
  return std::move(c).value();
}

LockOptions as(const std::string& owner, std::chrono::milliseconds ttl = 30s) {
  LockOptions o;
  o.ttl = ttl;
  o.auto_renew = false;
  o.owner = OwnerToken(owner);
  return o;
}

std::string text_of(const test::ReplyPtr& r) {
  return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string("-");
}

// The older dlock's script `name` (dc782f2), key_clock.lua's functions before it as it was sent.
std::string older_script(const std::string& name) {
  std::string text;
  for (const std::string& file : {std::string("key_clock"), name}) {
    std::ifstream in(std::string(DLOCK_PRE_STRKEY_DIR) + "/" + file + ".lua");
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_FALSE(s.str().empty()) << file;
    text += s.str();
  }
  return text;
}

// EVAL of `call` (its keys and arguments, the PUBLISH verb last if the script publishes) with
// this version's script text, or `text` (an older script taking the same keys and arguments).
test::ReplyPtr eval(const RedisServer& server, const node::Call& call,
                    const std::string& text = "") {
  std::vector<std::string> c{"EVAL", text.empty() ? call.script->source : text,
                             std::to_string(call.keys.size())};
  for (std::string_view k : call.keys) c.emplace_back(k);
  for (std::string_view a : call.args) c.emplace_back(a);
  if (call.script->publishes) c.emplace_back("publish");
  auto r = server.command(c);
  EXPECT_TRUE(r);
  return r;
}

lock::HoldId hold(const std::string& name, const std::string& owner, const std::string& id) {
  return lock::HoldId{name, OwnerToken(owner), id, lock::HoldKind::write};
}

node::Call acquire(const std::string& name, const std::string& owner, const std::string& id,
                   lock::WriterWait writer = {}) {
  return lock::acquire_call(hold(name, owner, id), 10s, std::nullopt, writer, 0, {},
                            lock::TokenCounter::node);
}

node::Call renew(const std::string& name, const std::string& owner, const std::string& id,
                 const std::string& ttl) {
  return node::Call{&scripts::renew(), {name}, {owner, id, ttl, "w"}};
}

node::Call release_batch(const std::string& name, const std::string& owner, const std::string& id) {
  return node::Call{&scripts::release_batch(), {name}, {owner, lock::release_channel(name), id}};
}

// The older release_batch.lua's item: the key and its queue; owner, channel, hold id (this
// version's does not send the queue).
node::Call older_release_batch(const std::string& name, const std::string& owner,
                               const std::string& id) {
  return node::Call{&scripts::release_batch(),
                    {name, lock::queue_key(name)},
                    {owner, lock::release_channel(name), id}};
}

node::Call acquire_batch(const std::string& name, const std::string& owner, const std::string& id) {
  return node::Call{&scripts::acquire_batch(),
                    {std::string(lock::kFenceFloorKey), lock::kMaxTtlKey, name,
                     lock::fence_key(name), lock::readers_key(name)},
                    {owner, id, "10000", "n"}};
}

// A hiredis connection subscribed to `name`'s release channel.
class Subscriber {
 public:
  Subscriber(const RedisServer& server, const std::string& name) {
    c_ = redisConnect("127.0.0.1", server.port());
    EXPECT_TRUE(c_ != nullptr && c_->err == 0);
    const std::string channel = lock::release_channel(name);
    freeReplyObject(redisCommand(c_, "SUBSCRIBE %b", channel.data(), channel.size()));
  }
  ~Subscriber() { redisFree(c_); }
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;
  // The next message's payload; "(pong)" if nothing was published before this call.
  std::string next() {
    redisAppendCommand(c_, "PING");  // its reply comes after anything published before
    redisReply* r = nullptr;
    if (redisGetReply(c_, reinterpret_cast<void**>(&r)) != REDIS_OK || r == nullptr) return "";
    std::string out = std::string(r->element[0]->str) == "message"
                          ? std::string(r->element[2]->str, r->element[2]->len)
                          : "(pong)";
    freeReplyObject(r);
    if (out != "(pong)" && redisGetReply(c_, reinterpret_cast<void**>(&r)) == REDIS_OK) {
      freeReplyObject(r);  // the PING's
    }
    return out;
  }

 private:
  redisContext* c_ = nullptr;
};

class Issue32StringKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    server_ = std::make_unique<RedisServer>();
  }
  test::ReplyPtr cmd(const std::vector<std::string>& args) const { return server_->command(args); }
  std::string get(const std::string& key) const { return text_of(cmd({"GET", key})); }
  long long pttl(const std::string& key) const { return cmd({"PTTL", key})->integer; }
  char flag(const std::string& name) const {
    const auto held = test::lock_key_hold(*server_, name);
    return held ? held->flag : '-';
  }
  std::unique_ptr<RedisServer> server_;
};

// The fast path writes the string with the lease's ttl, one SET NX PX: no hash, no PEXPIRE.
TEST_F(Issue32StringKeyTest, TheFastPathWritesAStringWithTheTtl) {
  Client client = client_on(*server_);
  auto warm = client.try_lock("warm-up", as("w o", 10s));  // the greeting, the max-ttl record
  ASSERT_TRUE(warm && warm->unlock());
  ASSERT_TRUE(cmd({"CONFIG", "RESETSTAT"}));
  auto lease = client.try_lock("job", as("w o", 10s));
  ASSERT_TRUE(lease) << lease.error().message();
  const std::string value = get("job");
  EXPECT_EQ(value.rfind("dlock. ", 0), 0u) << value;
  EXPECT_EQ(value.substr(value.size() - 4), " w o") << "the owner last, spaces and all";
  const auto held = test::lock_key_hold(*server_, "job");
  ASSERT_TRUE(held);
  EXPECT_EQ(held->owner, "w o");
  EXPECT_EQ(held->flag, '.');
  EXPECT_EQ(held->hold_id.find(' '), std::string::npos);
  EXPECT_GT(pttl("job"), 9000);
  EXPECT_LE(pttl("job"), 10000);
  EXPECT_EQ(server_->calls_of("hset"), 0);
  EXPECT_EQ(server_->calls_of("pexpire"), 0);
  EXPECT_EQ(server_->calls_of("set"), 1);
  ASSERT_TRUE(lease->unlock());
  EXPECT_FALSE(server_->exists("job"));
}

// A refused lock() flags the hold ('!'), and the holder's release then publishes.
TEST_F(Issue32StringKeyTest, ARefusalFlagsTheHoldAndItsReleasePublishes) {
  Client a = client_on(*server_), b = client_on(*server_);
  auto held = a.try_lock("job", as("a"));
  ASSERT_TRUE(held) << held.error().message();
  EXPECT_EQ(flag("job"), '.');
  ASSERT_FALSE(b.try_lock("job", as("b")));
  EXPECT_EQ(flag("job"), '!') << "the refusal flags the hold";
  EXPECT_GT(pttl("job"), 25000) << "SETRANGE keeps the ttl";
  Subscriber sub(*server_, "job");
  ASSERT_TRUE(cmd({"CONFIG", "RESETSTAT"}));
  ASSERT_TRUE(held->unlock());
  EXPECT_EQ(server_->calls_of("publish"), 1);
  EXPECT_EQ(sub.next(), "~a");
}

// Nobody refused: the release does not read the fair queue, but still publishes '~' and the
// owner, and replies how many heard it. A waiter that sleeps on a timer (after its attempt lost
// a race, refused by a hold given back at once) never flagged this hold, yet must hear its
// release, and the releasing client must see it listening, or its hand-off grace does not hold
// it back: with nothing published, one chaos worker took a lock 436 times in a row while three
// others waited (seed 20261128).
TEST_F(Issue32StringKeyTest, AnUnflaggedReleasePublishesButDoesNotReadTheQueue) {
  Client a = client_on(*server_);
  auto held = a.try_lock("job", as("a"));
  ASSERT_TRUE(held) << held.error().message();
  Subscriber sub(*server_, "job");
  ASSERT_TRUE(cmd({"CONFIG", "RESETSTAT"}));
  ASSERT_TRUE(held->unlock());
  EXPECT_FALSE(server_->exists("job"));
  EXPECT_EQ(server_->calls_of("publish"), 1);
  EXPECT_EQ(server_->calls_of("zrange"), 0) << "the queue is not read";
  EXPECT_EQ(server_->calls_of("del"), 1);
  EXPECT_EQ(sub.next(), "~a");
  // The script's reply counts the listener (lock/hand_off.h reads it), alone and batched.
  ASSERT_EQ(eval(*server_, acquire("job", "a", "a.2"))->type, REDIS_REPLY_INTEGER);
  EXPECT_EQ(eval(*server_, lock::release_call(hold("job", "a", "a.2")))->integer, 1);
  EXPECT_EQ(sub.next(), "~a");
  ASSERT_EQ(eval(*server_, acquire("job", "a", "a.3"))->type, REDIS_REPLY_INTEGER);
  auto r = eval(*server_, release_batch("job", "a", "a.3"));
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(r->element[0]->integer, 1);
  EXPECT_EQ(sub.next(), "~a");
}

// A fair grantee with a waiter behind it holds a flagged hold, so its release wakes that waiter
// at once (its nap would otherwise last up to a third of its 30 s waiter timeout).
TEST_F(Issue32StringKeyTest, AFairWaiterBehindAFairGranteeIsWokenByItsRelease) {
  Client a = client_on(*server_), b = client_on(*server_), c = client_on(*server_);
  auto fair = [](const std::string& owner) {
    LockOptions o = as(owner);
    o.fair = true;
    o.fair_waiter_timeout = 30s;
    return o;
  };
  auto first = a.lock("job", 5s, fair("a"));
  ASSERT_TRUE(first) << first.error().message();
  auto second = std::async(std::launch::async, [&] { return b.lock("job", 60s, fair("b")); });
  ASSERT_TRUE(test::eventually(
      [&] {
        return cmd({"ZCARD", lock::queue_key("job")})->integer == 1;
      },
      5s));
  auto third = std::async(std::launch::async, [&] { return c.lock("job", 60s, fair("c")); });
  ASSERT_TRUE(test::eventually(
      [&] {
        return cmd({"ZCARD", lock::queue_key("job")})->integer == 2;
      },
      5s));
  ASSERT_TRUE(first->unlock());
  auto b_lease = second.get();
  ASSERT_TRUE(b_lease) << b_lease.error().message();
  EXPECT_EQ(flag("job"), '!') << "c still queues behind the grantee";
  std::this_thread::sleep_for(300ms);
  const auto freed = Clock::now();
  ASSERT_TRUE(b_lease->unlock());
  ASSERT_EQ(third.wait_for(5s), std::future_status::ready) << "c was not woken by b's release";
  auto c_lease = third.get();
  ASSERT_TRUE(c_lease) << c_lease.error().message();
  EXPECT_LT(Clock::now() - freed, 5s);
  EXPECT_EQ(flag("job"), '.') << "nobody queues behind c";
  ASSERT_TRUE(c_lease->unlock());
}

// Readers refused by a writer's hold flag it, and are woken by its release (their nap: the
// hold's 30 s ttl).
TEST_F(Issue32StringKeyTest, ReadersRefusedByAWritersHoldAreWokenByItsRelease) {
  Client w = client_on(*server_), r = client_on(*server_);
  auto writer = w.try_lock("doc", as("w"));
  ASSERT_TRUE(writer) << writer.error().message();
  auto reader = std::async(std::launch::async, [&] { return r.lock_shared("doc", 60s, as("r")); });
  ASSERT_TRUE(test::eventually([&] { return flag("doc") == '!'; }, 5s)) << "the reader's refusal";
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(writer->unlock());
  ASSERT_EQ(reader.wait_for(5s), std::future_status::ready) << "the reader was not woken";
  auto lease = reader.get();
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->unlock());
}

// A writer refused by the readers of a writer that also reads (a downgrade) flags that write
// hold: the read hold's release publishes nothing while the write hold lives, so the write
// hold's release is the one that must wake the refused writer.
TEST_F(Issue32StringKeyTest, AWriterRefusedByTheReadsOfAWriterThatAlsoReadsFlagsItsWriteHold) {
  Client w = client_on(*server_), y = client_on(*server_);
  auto write = w.try_lock("doc", as("w"));
  ASSERT_TRUE(write) << write.error().message();
  auto read = w.try_lock_shared("doc", as("w"));
  ASSERT_TRUE(read) << read.error().message();
  EXPECT_EQ(flag("doc"), '.');
  auto refused = y.try_lock("doc", as("y"));
  ASSERT_FALSE(refused);
  EXPECT_EQ(flag("doc"), '!');
  ASSERT_TRUE(read->unlock());
  Subscriber sub(*server_, "doc");
  ASSERT_TRUE(write->unlock());
  EXPECT_EQ(sub.next(), "~w");
}

// A waiter's grant is flagged (acquire.lua ARGV[6] '1' after a refusal): other waiters may sleep
// behind it, unwoken (a client wakes one plain waiter per release message), and wake only if
// its release publishes. A first attempt's grant is not flagged.
TEST_F(Issue32StringKeyTest, AWaitersGrantIsFlaggedSoThatItsReleaseWakesTheNext) {
  Client a = client_on(*server_), b = client_on(*server_);
  auto held = a.try_lock("job", as("a"));
  ASSERT_TRUE(held) << held.error().message();
  auto waiter = std::async(std::launch::async, [&] { return b.lock("job", 60s, as("b")); });
  ASSERT_TRUE(test::eventually([&] { return flag("job") == '!'; }, 5s));
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(held->unlock());
  auto lease = waiter.get();
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_EQ(flag("job"), '!') << "a waiter's grant";
  ASSERT_TRUE(lease->unlock());
  auto first = b.lock("job", 60s, as("b"));
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(flag("job"), '.') << "granted at its first attempt";
  ASSERT_TRUE(first->unlock());
}

// A writer that registered as waiting (ARGV[6] '1') is granted a flagged hold: readers its
// registration refused (no lock key to flag then) wait for its release.
TEST_F(Issue32StringKeyTest, AGrantAfterAWaitingWritersRegistrationIsFlagged) {
  auto r = eval(*server_, acquire("doc", "w", "c.1", lock::WriterWait{10s, true}));
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
  EXPECT_EQ(flag("doc"), '!');
  r = eval(*server_, acquire("other", "w", "c.2", lock::WriterWait{10s, false}));
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
  EXPECT_EQ(flag("other"), '.');
}

// A registered writer that gives up while a plain writer's unflagged hold is present flags that
// hold (review finding: a reader slept 29,994 ms when the hold's release published nothing; an
// unflagged release now publishes too, but does not read the fair queue). The same for a fair
// queue's head giving up beside a plain client's hold: the next in line is named by its release.
TEST_F(Issue32StringKeyTest, AWriterGivingUpFlagsAnUnflaggedHold) {
  const lock::HoldId reader{"doc", OwnerToken("r1"), "r.1", lock::HoldKind::read};
  auto r = eval(*server_,
                lock::acquire_call(reader, 10s, std::nullopt, {}, 0, {}, lock::TokenCounter::node));
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << "the read hold";
  r = eval(*server_, acquire("doc", "x", "x.1", lock::WriterWait{30s, false}));
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << "refused by the reader, registered";
  ASSERT_EQ(eval(*server_, lock::release_call(reader))->type, REDIS_REPLY_INTEGER);
  r = eval(*server_, acquire("doc", "y", "y.1"));
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << "a plain writer, fast path";
  ASSERT_EQ(flag("doc"), '.');
  Subscriber readers(*server_, "doc");
  ASSERT_EQ(eval(*server_, lock::fair_leave_call("doc", OwnerToken("x")))->integer, 1);
  EXPECT_EQ(flag("doc"), '!');
  ASSERT_EQ(eval(*server_, lock::release_call(hold("doc", "y", "y.1")))->type, REDIS_REPLY_INTEGER);
  EXPECT_NE(readers.next(), "(pong)") << "the release told those the registration kept out";

  // A fair queue's head gives up beside a plain client's hold: the next in line is told by it.
  ASSERT_EQ(eval(*server_, acquire("q", "y", "y.2"))->type, REDIS_REPLY_INTEGER);
  cmd({"ZADD", lock::queue_key("q"), "1", "head"});
  cmd({"ZADD", lock::queue_key("q"), "2", "next"});
  ASSERT_EQ(eval(*server_, lock::fair_leave_call("q", OwnerToken("head")))->integer, 1);
  EXPECT_EQ(flag("q"), '!');
}

// Review of issue 32: a fair semaphore waiter first in line gives up while slot 0 is held: its
// queue is on slot 0, and another slot may be free (its release named this waiter, which gave
// up before it tried). The next in line is told; before, slot 0 was flagged and nothing
// published, and the next waiter slept until its timer with a permit free.
TEST_F(Issue32StringKeyTest, AFairSemaphoreHeadGivingUpTellsTheNextWhileSlotZeroIsHeld) {
  const std::string slot = lock::semaphore_slot("pool", 0);
  cmd({"SET", slot, "dlock. c.1 o", "PX", "10000"});
  cmd({"ZADD", lock::queue_key(slot), "1", "head", "2", "next"});
  cmd({"HSET", lock::queue_alive_key(slot), "head", "99999999999999", "next", "99999999999999"});
  Subscriber sub(*server_, slot);
  ASSERT_EQ(eval(*server_, lock::fair_leave_call(slot, OwnerToken("head")))->integer, 1);
  EXPECT_EQ(sub.next(), "next");
  EXPECT_EQ(cmd({"ZCARD", lock::queue_key(slot)})->integer, 1);
  // Not first in line: nobody is told.
  cmd({"ZADD", lock::queue_key(slot), "3", "last"});
  ASSERT_EQ(eval(*server_, lock::fair_leave_call(slot, OwnerToken("last")))->integer, 1);
  EXPECT_EQ(sub.next(), "(pong)");
}

// Review of issue 32: the head gives up with the lock free, and the next member is past its
// check-in deadline (a waiter that died): the first live one behind it is told, and the dead
// one leaves the queue, as a release's walk does. Before, the dead one was named and the live
// waiter slept until its timer.
TEST_F(Issue32StringKeyTest, AFairHeadGivingUpTellsTheFirstLiveWaiter) {
  cmd({"ZADD", lock::queue_key("q"), "1", "head", "2", "dead", "3", "live"});
  cmd({"HSET", lock::queue_alive_key("q"), "head", "99999999999999", "dead", "1", "live",
       "99999999999999"});
  Subscriber sub(*server_, "q");
  ASSERT_EQ(eval(*server_, lock::fair_leave_call("q", OwnerToken("head")))->integer, 1);
  EXPECT_EQ(sub.next(), "live");
  auto left = cmd({"ZRANGE", lock::queue_key("q"), "0", "-1"});
  ASSERT_EQ(left->elements, 1u);
  EXPECT_EQ(std::string(left->element[0]->str), "live");
}

// End to end: readers refused by a waiting writer are woken when that writer, once granted,
// releases.
TEST_F(Issue32StringKeyTest, ReadersRefusedByAWaitingWriterAreWokenByItsRelease) {
  Client r1 = client_on(*server_), w = client_on(*server_), r2 = client_on(*server_);
  auto first = r1.try_lock_shared("doc", as("r1"));
  ASSERT_TRUE(first) << first.error().message();
  auto writer = std::async(std::launch::async, [&] { return w.lock("doc", 60s, as("w")); });
  ASSERT_TRUE(test::eventually(
      [&] {
        return cmd({"ZCARD", lock::writers_waiting_key("doc")})->integer >= 2;
      },
      5s))
      << "the writer registers (its entry and the key's anchor)";
  auto reader =
      std::async(std::launch::async, [&] { return r2.lock_shared("doc", 60s, as("r2")); });
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(first->unlock());
  auto w_lease = writer.get();
  ASSERT_TRUE(w_lease) << w_lease.error().message();
  EXPECT_EQ(flag("doc"), '!');
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(w_lease->unlock());
  ASSERT_EQ(reader.wait_for(5s), std::future_status::ready) << "the reader was not woken";
  auto lease = reader.get();
  ASSERT_TRUE(lease) << lease.error().message();
  ASSERT_TRUE(lease->unlock());
}

// A semaphore slot's release publishes whatever its flag: any slot's release wakes the
// semaphore's permit waiters.
TEST_F(Issue32StringKeyTest, ASemaphoreSlotReleaseAlwaysPublishes) {
  const std::string slot = lock::semaphore_slot("pool", 0);
  cmd({"SET", slot, "dlock. c.1 o", "PX", "10000"});
  cmd({"HSET", lock::permit_record_key(slot), "held", "1", "n", "2"});
  Subscriber sub(*server_, slot);
  auto r = eval(*server_, lock::release_call(hold(slot, "o", "c.1")));
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
  EXPECT_EQ(r->integer, 1) << "published to the one subscriber";
  EXPECT_FALSE(server_->exists(slot));
  EXPECT_FALSE(server_->exists(lock::permit_record_key(slot)));
  EXPECT_EQ(sub.next(), "~o");
}

// End to end: a permit waiter is woken by the holder's release (its nap: the slot's 30 s ttl).
TEST_F(Issue32StringKeyTest, APermitWaiterIsWokenByARelease) {
  Client a = client_on(*server_), b = client_on(*server_);
  LockOptions o;
  o.ttl = 30s;
  o.auto_renew = false;
  Semaphore sa(a, "pool", 1, o);
  Semaphore sb(b, "pool", 1, o);
  auto permit = sa.try_acquire_lease();
  ASSERT_TRUE(permit) << permit.error().message();
  auto waiter = std::async(std::launch::async, [&] { return sb.acquire_lease(60s); });
  std::this_thread::sleep_for(500ms);
  ASSERT_TRUE(permit->unlock());
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready) << "the permit waiter was not woken";
  auto got = waiter.get();
  ASSERT_TRUE(got) << got.error().message();
  ASSERT_TRUE(got->unlock());
}

// This client's stale hold is taken over with its flag (its waiters still wait) and its ttl
// (never shortened); renew re-arms the ttl only, the flag survives; both by owner too.
TEST_F(Issue32StringKeyTest, TakeoverAndRenewKeepTheFlag) {
  cmd({"SET", "job", "dlock! cl.1 o", "PX", "50000"});
  auto r = eval(*server_, acquire("job", "o", "cl.2"));
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
  EXPECT_EQ(get("job"), "dlock! cl.2 o");
  EXPECT_GT(pttl("job"), 40000) << "a takeover never shortens the ttl";
  cmd({"SET", "quiet", "dlock. cl.1 o", "PX", "500"});
  r = eval(*server_, acquire("quiet", "o", "cl.3"));
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
  EXPECT_EQ(get("quiet"), "dlock. cl.3 o");
  EXPECT_GT(pttl("quiet"), 9000);

  cmd({"PEXPIRE", "job", "1000"});
  r = eval(*server_, renew("job", "o", "cl.2", "20000"));
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(r->element[0]->integer, 1);
  EXPECT_EQ(get("job"), "dlock! cl.2 o");
  EXPECT_GT(pttl("job"), 15000);
  r = eval(*server_, renew("job", "o", "", "30000"));  // by owner
  EXPECT_EQ(r->element[0]->integer, 1);
  EXPECT_GT(pttl("job"), 25000);
  EXPECT_EQ(get("job"), "dlock! cl.2 o");
  r = eval(*server_, renew("job", "o", "cl.1", "60000"));  // the older hold: gone
  EXPECT_EQ(r->element[0]->integer, 0);
  r = eval(*server_, renew("job", "x", "", "60000"));  // another owner
  EXPECT_EQ(r->element[0]->integer, 0);
  EXPECT_LE(pttl("job"), 30000);
}

// Release by owner (hold id ''), as Client::unlock by owner does; another owner's: -1.
TEST_F(Issue32StringKeyTest, AReleaseByOwnerFreesAStringHold) {
  cmd({"SET", "job", "dlock. cl.1 o w", "PX", "50000"});
  auto r = eval(*server_, lock::release_call(hold("job", "o", "")));
  EXPECT_EQ(r->integer, -1) << "\"o\" is not \"o w\"";
  r = eval(*server_, lock::release_call(hold("job", "o w", "cl.2")));
  EXPECT_EQ(r->integer, -1) << "another hold of the owner";
  EXPECT_TRUE(server_->exists("job"));
  r = eval(*server_, lock::release_call(hold("job", "o w", "")));
  EXPECT_EQ(r->integer, 0);
  EXPECT_FALSE(server_->exists("job"));
  // Through the client, by owner.
  Client client = client_on(*server_);
  auto lease = client.try_lock("job", as("handed"));
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_TRUE(client.unlock("job", OwnerToken("handed")));
  EXPECT_FALSE(server_->exists("job"));
}

// status (inspect.lua) and force_release on a string hold: a dlock lock, the owner and hold id.
TEST_F(Issue32StringKeyTest, StatusAndForceReleaseOfAStringHold) {
  Client client = client_on(*server_);
  auto lease = client.try_lock("job", as("worker 7"));
  ASSERT_TRUE(lease) << lease.error().message();
  auto status = client.status("job");
  ASSERT_TRUE(status) << status.error().message();
  ASSERT_EQ(status->nodes.size(), 1u);
  EXPECT_TRUE(status->held);
  EXPECT_EQ(status->nodes[0].kind, KeyKind::dlock);
  ASSERT_EQ(status->nodes[0].owners.size(), 1u);
  EXPECT_EQ(status->nodes[0].owners[0].owner.str(), "worker 7");
  EXPECT_EQ(status->nodes[0].owners[0].hold, test::lock_key_hold(*server_, "job")->hold_id);
  auto forced = client.force_release("job");
  ASSERT_TRUE(forced) << forced.error().message();
  ASSERT_EQ(forced->size(), 1u);
  EXPECT_EQ((*forced)[0].outcome, ForceOutcome::deleted);
  EXPECT_FALSE(server_->exists("job"));
}

// The CLI's `dlock status` on a string hold (written as this version writes it): a dlock lock
// with its owner and hold id, not a foreign key (inspect.lua).
TEST_F(Issue32StringKeyTest, CliStatusShowsAStringHold) {
  cmd({"SET", "job", "dlock! cl.7 worker 7", "PX", "30000"});
  const std::string command =
      std::string(DLOCK_TOOL_PATH) + " status --json -r " + server_->url() + " job 2>&1";
  FILE* p = popen(command.c_str(), "r");
  ASSERT_TRUE(p != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("\"kind\":\"dlock\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"owner\":\"worker 7\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"hold\":\"cl.7\""), std::string::npos) << out;
  EXPECT_EQ(get("job"), "dlock! cl.7 worker 7") << "status reads only";
}

// An older dlock's hash and another library's string: held, never touched, by every script.
void expect_held_and_untouched(const RedisServer& server, const std::string& before, bool hash) {
  auto pttl = [&](const std::string& key) { return server.command({"PTTL", key})->integer; };
  Client client = client_on(server);
  auto w = client.try_lock("job", as("someone"));
  EXPECT_FALSE(w);
  if (!w) {
    EXPECT_TRUE(w.error().is(errc::lock_held)) << w.error().message();
  }
  EXPECT_FALSE(client.try_lock_shared("job", as("someone")));
  LockOptions fair = as("someone");
  fair.fair = true;
  EXPECT_FALSE(client.try_lock("job", fair));
  auto r = eval(server, acquire("job", "someone", "cl.1"));
  EXPECT_EQ(r->type, REDIS_REPLY_ARRAY) << "refused";
  r = eval(server, acquire("job", "someone", "cl.1", lock::WriterWait{10s, true}));
  EXPECT_EQ(r->type, REDIS_REPLY_ARRAY) << "refused";
  r = eval(server, acquire_batch("job", "someone", "cl.1"));
  EXPECT_EQ(r->element[0]->type, REDIS_REPLY_NIL);
  r = eval(server, lock::release_call(hold("job", "other", "")));
  EXPECT_EQ(r->integer, -1);
  r = eval(server, release_batch("job", "someone", "cl.9"));
  if (hash) {
    EXPECT_EQ(r->element[0]->type, REDIS_REPLY_NIL) << "an older dlock's hold: alone";
  } else {
    EXPECT_EQ(r->element[0]->integer, -1);
  }
  r = eval(server, renew("job", "other", "", "60000"));
  EXPECT_EQ(r->element[0]->integer, 0);
  auto status = client.status("job");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->nodes[0].kind, hash ? KeyKind::dlock : KeyKind::foreign);
  if (!hash) {
    auto forced = client.force_release("job");
    ASSERT_TRUE(forced);
    EXPECT_EQ((*forced)[0].outcome, ForceOutcome::kept_foreign);
  }
  EXPECT_EQ(text_of(server.command({"DUMP", "job"})), before) << "the key was changed";
  EXPECT_LE(pttl("job"), 20000) << "the key's ttl was re-armed";
  EXPECT_GT(pttl("job"), 0);
}

TEST_F(Issue32StringKeyTest, AForeignStringIsHeldAndNeverTouched) {
  cmd({"SET", "job", "abc", "PX", "20000"});
  // Strings close to a hold, but not one: still another library's. A hold's owner is never
  // empty: "dlock. cl.1 " was read as a hold of owner "" (and flagged by a refusal).
  expect_held_and_untouched(*server_, text_of(cmd({"DUMP", "job"})), false);
  for (const char* v : {"dlock. cl.1", "dlock? cl.1 someone", "dlock.  someone", "x",
                        "dlock. cl.1 ", "dlock! cl.1 "}) {
    cmd({"SET", "job", v, "PX", "20000"});
    expect_held_and_untouched(*server_, text_of(cmd({"DUMP", "job"})), false);
  }
}

TEST_F(Issue32StringKeyTest, AnOlderDlocksHashIsHeldAndNeverTouched) {
  cmd({"HSET", "job", "someone", "cl.9"});
  cmd({"PEXPIRE", "job", "20000"});
  expect_held_and_untouched(*server_, text_of(cmd({"DUMP", "job"})), true);
}

// The older dlock's own scripts on its hash hold: this version refuses meanwhile (fast path,
// batch and slow paths: above), status shows it, its owner releases it (with the older
// release.lua, or this version's by owner: an older client's hold handed over), and only then
// this version takes the name.
TEST_F(Issue32StringKeyTest, AnOlderDlocksHoldIsReleasedByItsOwner) {
  Client client = client_on(*server_);
  for (const bool older_release : {true, false}) {
    auto r = eval(*server_, acquire("job", "old", "oc.1"), older_script("acquire"));
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << "the older acquire.lua granted";
    ASSERT_EQ(text_of(cmd({"TYPE", "job"})), "-");  // TYPE replies a status, not a string
    EXPECT_EQ(cmd({"TYPE", "job"})->str, std::string("hash"));
    EXPECT_FALSE(client.try_lock("job", as("new")));
    auto status = client.status("job");
    ASSERT_TRUE(status);
    EXPECT_EQ(status->nodes[0].kind, KeyKind::dlock);
    ASSERT_EQ(status->nodes[0].owners.size(), 1u);
    EXPECT_EQ(status->nodes[0].owners[0].owner.str(), "old");
    // The older renew and this version's both re-arm it.
    r = eval(*server_, renew("job", "old", "oc.1", "40000"), older_script("renew"));
    EXPECT_EQ(r->element[0]->integer, 1);
    r = eval(*server_, renew("job", "old", "oc.1", "50000"));
    EXPECT_EQ(r->element[0]->integer, 1);
    EXPECT_GT(pttl("job"), 45000);
    {
      Subscriber sub(*server_, "job");
      r = eval(*server_, lock::release_call(hold("job", "old", older_release ? "oc.1" : "")),
               older_release ? older_script("release") : "");
      EXPECT_EQ(r->integer, 1) << "released and published (an older dlock's waiters listen)";
      EXPECT_EQ(sub.next(), "~old");
    }
    EXPECT_FALSE(server_->exists("job"));
    auto lease = client.try_lock("job", as("new"));
    ASSERT_TRUE(lease) << lease.error().message();
    ASSERT_TRUE(lease->unlock());
  }
}

// The older scripts against a hold of this version: foreign to them, held and never touched.
TEST_F(Issue32StringKeyTest, OlderScriptsSeeANewHoldAsForeign) {
  Client client = client_on(*server_);
  auto lease = client.try_lock("job", as("new"));
  ASSERT_TRUE(lease) << lease.error().message();
  const std::string id = test::lock_key_hold(*server_, "job")->hold_id;
  const std::string before = text_of(cmd({"DUMP", "job"}));
  // Another owner, and the same owner with a later hold id of the same client (an older
  // dlock's takeover of a stale hold): both refused.
  const std::string later = id.substr(0, id.rfind('.')) + ".999";
  for (const auto& [owner, hold_id] :
       std::vector<std::pair<std::string, std::string>>{{"old", "oc.1"}, {"new", later}}) {
    auto r = eval(*server_, acquire("job", owner, hold_id), older_script("acquire"));
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << "the older acquire.lua refused";
    EXPECT_EQ(r->element[0]->integer, 0);
    r = eval(*server_,
             lock::acquire_call(hold("job", owner, hold_id), 10s, lock::FairTicket{1, 30s, false},
                                {}, 0, {}),
             older_script("fair_acquire"));
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    EXPECT_EQ(r->element[0]->integer, 0) << "the older fair_acquire.lua refused";
    r = eval(*server_, acquire_batch("job", owner, hold_id), older_script("acquire_batch"));
    EXPECT_EQ(r->element[0]->type, REDIS_REPLY_NIL);
  }
  auto r = eval(*server_, lock::release_call(hold("job", "new", id)), older_script("release"));
  EXPECT_EQ(r->integer, -1);
  r = eval(*server_, lock::release_call(hold("job", "new", "")), older_script("release"));
  EXPECT_EQ(r->integer, -1);
  r = eval(*server_, older_release_batch("job", "new", id), older_script("release_batch"));
  EXPECT_EQ(r->element[0]->integer, -1);
  r = eval(*server_, renew("job", "new", id, "90000"), older_script("renew"));
  EXPECT_EQ(r->element[0]->integer, 0);
  EXPECT_EQ(text_of(cmd({"DUMP", "job"})), before) << "an older script changed the hold";
  EXPECT_LE(pttl("job"), 30000);
  ASSERT_TRUE(lease->unlock());
  EXPECT_FALSE(server_->exists("job"));
}

// Never two holders: this version's clients and the older scripts take one name in turn, each
// holder checking that it is alone while it holds.
TEST_F(Issue32StringKeyTest, NeverTwoHoldersAcrossVersions) {
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> grants{0};
  auto critical = [&] {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    grants.fetch_add(1);
    std::this_thread::sleep_for(1ms);
    inside.fetch_sub(1);
  };
  const std::string older_acquire = older_script("acquire");
  const std::string older_release = older_script("release");
  const auto until = Clock::now() + 4s;
  std::vector<std::thread> workers;
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back([&, i] {
      Client client = client_on(*server_);
      while (Clock::now() < until) {
        auto lease = client.try_lock("job", as("new" + std::to_string(i), 10s));
        if (!lease) continue;
        critical();
        EXPECT_TRUE(lease->unlock());
      }
    });
    workers.emplace_back([&, i] {
      const std::string owner = "old" + std::to_string(i);
      for (int n = 1; Clock::now() < until; ++n) {
        const std::string id = "older" + std::to_string(i) + "." + std::to_string(n);
        auto r = eval(*server_, acquire("job", owner, id), older_acquire);
        if (!r || r->type != REDIS_REPLY_INTEGER) continue;
        critical();
        r = eval(*server_, lock::release_call(hold("job", owner, id)), older_release);
        EXPECT_GE(r->integer, 0);
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GT(grants.load(), 20);
  EXPECT_FALSE(server_->exists("job")) << "every holder released";
}

}  // namespace
}  // namespace dlock

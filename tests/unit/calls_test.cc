// SPDX-License-Identifier: MIT
// The lock's call builders (lock/calls.h): the node layer routes by the facts they set, so each
// must mark exactly its node keys, and an acquisition must say how to record its ttl.
#include "lock/calls.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lock/keys.h"
#include "resp/encode.h"

namespace dlock::lock {
namespace {

bool named_as_node_key(std::string_view key) {
  return key == kFenceFloorKey || key == kMaxTtlKey || key == kBootsKey;
}

// Bit i of node_keys is set exactly for the keys named as node keys.
void expect_node_keys_marked(const node::Call& call) {
  ASSERT_NE(call.script, nullptr);
  for (std::size_t i = 0; i < call.keys.size(); ++i) {
    EXPECT_EQ(call.is_node_key(i), named_as_node_key(call.keys[i])) << "key " << call.keys[i];
  }
  EXPECT_EQ(call.node_keys >> call.keys.size(), 0U) << "a bit past the last key";
}

HoldId hold_of(std::string name, HoldKind kind = HoldKind::write) {
  return HoldId{std::move(name), OwnerToken("owner-1"), "client.7", kind};
}

TEST(CallsTest, EveryBuilderMarksExactlyItsNodeKeys) {
  const std::vector<node::Call> calls{
      acquire_call(hold_of("job"), std::chrono::milliseconds(5000), std::nullopt, WriterWait{}, 0,
                   "12"),
      acquire_call(hold_of("job"), std::chrono::milliseconds(5000),
                   FairTicket{1000, std::chrono::milliseconds(300), true}, WriterWait{}, 0, "12"),
      acquire_call(hold_of(semaphore_slot("pool", 2)), std::chrono::milliseconds(5000),
                   std::nullopt, WriterWait{}, 4, ""),
      acquire_call(hold_of("{tag}x", HoldKind::read), std::chrono::milliseconds(5000), std::nullopt,
                   WriterWait{std::chrono::milliseconds(90), true}, 0, ""),
      announced_ttl_call(std::chrono::milliseconds(5000), "12"),
      release_call(hold_of("job")),
      release_call(hold_of(semaphore_slot("pool", 2))),
      fair_leave_call("job", OwnerToken("owner-1")),
      fence_raise_call(hold_of("job"), 42, std::chrono::milliseconds(5000)),
      fence_raise_call(hold_of("{tag}x", HoldKind::read), 42, std::chrono::milliseconds(5000)),
      max_ttl_raise_call(std::chrono::milliseconds(5000)),
      max_ttl_retract_call({"5000.12"}),
      hello_call({"0", "3", "greet"}),
      floor_raise_call(42),
      inspect_call("job"),
      force_release_call("job", true),
      semaphore_resize_call("pool", 3, 3, 8),
  };
  for (const auto& call : calls) expect_node_keys_marked(call);
}

TEST(CallsTest, AnAcquisitionSaysWhichTtlToRecordAndHow) {
  const node::Call call = acquire_call(hold_of("job"), std::chrono::milliseconds(5000),
                                       std::nullopt, WriterWait{}, 0, "12");
  ASSERT_TRUE(call.record_ttl.has_value());
  EXPECT_EQ(*call.record_ttl, std::chrono::milliseconds(5000));
  EXPECT_EQ(call.announcement.str(), "12");
  ASSERT_NE(call.record_call, nullptr);
  const node::Call record = call.record_call(*call.record_ttl, call.announcement.str());
  // The member the greeting's retraction takes back, for twice the ttl.
  EXPECT_EQ(record.keys.to_vector(), std::vector<std::string>{kMaxTtlKey});
  EXPECT_EQ(record.args.to_vector(), (std::vector<std::string>{"5000.12", "10000"}));
  EXPECT_TRUE(record.is_node_key(0));
}

// A renewal round's record is the bare ttl for twice the ttl, and a node confirms it like a
// grant's (Call::records_itself): nothing raised before it, its integer reply the "grant".
TEST(CallsTest, ARenewalRoundsRecordIsConfirmedLikeAGrantsRecord) {
  const node::Call call = max_ttl_raise_call(std::chrono::milliseconds(5000));
  EXPECT_EQ(call.keys.to_vector(), std::vector<std::string>{kMaxTtlKey});
  EXPECT_EQ(call.args.to_vector(), (std::vector<std::string>{"5000", "10000"}));
  ASSERT_TRUE(call.record_ttl.has_value());
  EXPECT_EQ(*call.record_ttl, std::chrono::milliseconds(5000));
  EXPECT_TRUE(call.records_itself);
  ASSERT_NE(call.record_call, nullptr);
  EXPECT_EQ(call.record_call(*call.record_ttl, "").args, call.args);
  ASSERT_NE(call.granted, nullptr);
  resp::Reply raised;
  raised.type = resp::Reply::Type::integer;
  raised.integer = 5000;
  EXPECT_TRUE(call.granted(raised));
  resp::Reply oom;
  oom.type = resp::Reply::Type::error;
  oom.str = "OOM command not allowed";
  EXPECT_FALSE(call.granted(oom));
}

// fence_raise.lua names the hold where it lives: the lock key of a write hold (a semaphore's
// slot is one), the readers of a read hold; in the name's slot either way.
TEST(CallsTest, AFenceRaiseNamesTheHoldWhereItLives) {
  const node::Call write = fence_raise_call(hold_of("job"), 42, std::chrono::milliseconds(5000));
  EXPECT_EQ(write.keys,
            (std::vector<std::string>{fence_key("job"), std::string(kFenceFloorKey), "job"}));
  EXPECT_EQ(write.args, (std::vector<std::string>{"42", "5000", "owner-1", "client.7", "w"}));
  const node::Call read =
      fence_raise_call(hold_of("{tag}x", HoldKind::read), 42, std::chrono::milliseconds(5000));
  EXPECT_EQ(read.keys[2], readers_key("{tag}x"));
  EXPECT_EQ(read.args[4], "r");
  EXPECT_EQ(node::key_slot(read.keys[2]), node::key_slot(read.keys[0]));
  const std::string slot = semaphore_slot("pool", 2);
  EXPECT_EQ(fence_raise_call(hold_of(slot), 42, std::chrono::milliseconds(5000)).keys[2], slot);
}

TEST(CallsTest, OnlyAcquisitionsRecordATtl) {
  EXPECT_FALSE(release_call(hold_of("job")).record_ttl.has_value());
  EXPECT_FALSE(
      fence_raise_call(hold_of("job"), 1, std::chrono::milliseconds(10)).record_ttl.has_value());
  EXPECT_FALSE(hello_call({}).record_ttl.has_value());
}

// The native acquisition (docs/protocol.md): only the acquisitions acquire.lua's fast path
// would take whole have a native form; its four commands are encoded byte for byte as hiredis
// would write them.
TEST(CallsTest, OnlyAFastPathAcquisitionHasANativeFormEncodedAsFourCommands) {
  using std::chrono::milliseconds;
  const node::Call plain = acquire_call(hold_of("job"), milliseconds(5000), std::nullopt,
                                        WriterWait{}, 0, "", TokenCounter::node);
  ASSERT_NE(plain.native.encode, nullptr);
  EXPECT_EQ(plain.native.replies, 4U);
  std::string out = "kept";
  plain.native.encode(plain, out);
  const std::string expected =
      "kept" + resp::encode_command({"SET", "job", "dlock. client.7 owner-1", "NX", "PX", "5000"}) +
      resp::encode_command({"EXISTS", "dlock:readers:{job}", "dlock:fence:{job}"}) +
      resp::encode_command({"INCR", "dlock:fence-floor"}) + resp::encode_command({"GET", "job"});
  EXPECT_EQ(out, expected);
  const std::vector<node::Call> none{
      acquire_call(hold_of("job"), milliseconds(5000), std::nullopt, WriterWait{}, 0, ""),
      acquire_call(hold_of("job", HoldKind::read), milliseconds(5000), std::nullopt, WriterWait{},
                   0, "", TokenCounter::node),
      acquire_call(hold_of("job"), milliseconds(5000), FairTicket{1000, milliseconds(300), true},
                   WriterWait{}, 0, "", TokenCounter::node),
      acquire_call(hold_of("job"), milliseconds(5000), std::nullopt,
                   WriterWait{milliseconds(100), true, false}, 0, "", TokenCounter::node),
      acquire_call(hold_of("job"), milliseconds(5000), std::nullopt,
                   WriterWait{milliseconds(100), false, true}, 0, "", TokenCounter::node),
      acquire_call(hold_of(semaphore_slot("pool", 2)), milliseconds(5000), std::nullopt,
                   WriterWait{}, 4, "", TokenCounter::node)};
  for (const auto& call : none) EXPECT_EQ(call.native.encode, nullptr);
}

resp::Reply status(std::string text) {
  resp::Reply r;
  r.type = resp::Reply::Type::status;
  r.str = std::move(text);
  return r;
}
resp::Reply integer(std::int64_t n) {
  resp::Reply r;
  r.type = resp::Reply::Type::integer;
  r.integer = n;
  return r;
}
resp::Reply bulk(std::string text) {
  resp::Reply r;
  r.type = resp::Reply::Type::string;
  r.str = std::move(text);
  return r;
}
resp::Reply replies_of(std::vector<resp::Reply> elements) {
  resp::Reply r;
  r.type = resp::Reply::Type::array;
  r.elements = std::move(elements);
  return r;
}

// The grant only when the SET wrote, nothing was in the way, the counter counts and the hold was
// still this one after the INCR (a key deleted between the SET and the INCR and taken by another
// must not leave this attempt with the larger token: the review of the native acquisition).
TEST(CallsTest, TheNativeRepliesAreAGrantOnlyWhenTheHoldWasStillThisOne) {
  const node::Call call = acquire_call(hold_of("job"), std::chrono::milliseconds(5000),
                                       std::nullopt, WriterWait{}, 0, "", TokenCounter::node);
  const std::int64_t token = 1'700'000'000'000'123;
  const auto read = [&](std::vector<resp::Reply> elements) {
    resp::Reply r = replies_of(std::move(elements));
    const node::NativeReading reading = call.native.read(call, r);
    return std::pair{reading, r};
  };
  for (const char* flag : {".", "!"}) {
    const auto [reading, reply] = read({status("OK"), integer(0), integer(token),
                                        bulk(std::string("dlock") + flag + " client.7 owner-1")});
    EXPECT_EQ(reading, node::NativeReading::answered) << flag;
    EXPECT_TRUE(reply.is_integer());
    EXPECT_EQ(reply.integer, token);
  }
  using R = node::NativeReading;
  const std::vector<std::pair<std::vector<resp::Reply>, R>> others{
      {{resp::Reply{}, integer(0), integer(token), bulk("dlock. other.1 owner-2")}, R::script},
      {{status("OK"), integer(1), integer(token), bulk("dlock. client.7 owner-1")},
       R::script_after},
      {{status("OK"), integer(0), integer(2), bulk("dlock. client.7 owner-1")}, R::script_after},
      {{status("OK"), integer(0), integer(token), resp::Reply{}}, R::script_after},
      {{status("OK"), integer(0), integer(token), bulk("dlock. other.1 owner-2")}, R::script_after},
      {{status("OK"), integer(0), integer(token), bulk("dlock. client.7 owner-1x")},
       R::script_after},
      {{status("OK"), integer(0), integer(token), bulk("dlock. client.70 owner-1")},
       R::script_after},
      {{status("OOM command not allowed"), integer(0), integer(token), resp::Reply{}}, R::script}};
  for (std::size_t i = 0; i < others.size(); ++i) {
    EXPECT_EQ(read(others[i].first).first, others[i].second) << "case " << i;
  }
  // After commands that wrote: acquire.lua itself, told the release channel and the verb.
  const node::Call after = call.native.after(call);
  EXPECT_EQ(after.script, call.script);
  ASSERT_EQ(after.args.size(), call.args.size() + 3);
  EXPECT_EQ(std::string(after.args[call.args.size()]), "");
  EXPECT_EQ(std::string(after.args[call.args.size() + 1]), "dlock:release:{job}");
  EXPECT_EQ(std::string(after.args[call.args.size() + 2]), "publish");
}

}  // namespace
}  // namespace dlock::lock

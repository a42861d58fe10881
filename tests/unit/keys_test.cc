// SPDX-License-Identifier: MIT
// The names of a lock's keys and channels (src/lock/keys.h): every slot of a semaphore
// publishes on its semaphore's one channel, no other name is changed, and every key and channel
// of a name lives in the name's Redis Cluster slot, whatever braces the name holds.
#include "lock/keys.h"

#include <gtest/gtest.h>

#include <set>

namespace dlock::lock {
namespace {

// Lock names that would be written over the nodes' own keys (or a cluster slot's copies of them).
TEST(KeysTest, NodeKeysAreNoLockNames) {
  for (const char* own : {"dlock:fence-floor", "dlock:max-ttl", "dlock:boots", "dlock:max-ttl:{a}",
                          "dlock:fence-floor:{0}"}) {
    EXPECT_TRUE(names_a_node_key(own)) << own;
  }
  for (const char* name :
       {"dlock:max-ttls", "dlock:fence:{job}", "job", "dlock:sem:{p}:0", "dlock:boot", ""}) {
    EXPECT_FALSE(names_a_node_key(name)) << name;
  }
}

// names_a_node_key and names_a_dlock_key stop at once for a name outside "dlock:": every key and
// prefix they look for must start with it, or a lock name could take that key over.
TEST(KeysTest, EveryKeyDlockKeepsStartsWithItsPrefix) {
  for (const std::string_view key :
       {kFencePrefix, kReadersPrefix, kWritersWaitingPrefix, kPermitsPrefix, kQueuePrefix,
        kQueueAlivePrefix, kReleasePrefix, kFenceFloorKey, std::string_view(kMaxTtlKey),
        std::string_view(kBootsKey), kAcceptedPrefix}) {
    EXPECT_TRUE(key.starts_with(kDlockKeyPrefix)) << key;
  }
}

// Lock names that would be another name's keys: a grant of "job" took dlock:fence:{job} away
// (GETDEL of its counter), another client's lock by that name with it (review, issue 32).
TEST(KeysTest, KeysOfOtherNamesAreNoLockNames) {
  for (const std::string& name : {std::string("job"), std::string("a{b}c")}) {
    for (const std::string& key : {fence_key(name), readers_key(name), writers_waiting_key(name),
                                   queue_key(name), queue_alive_key(name), accepted_token_key(name),
                                   permit_record_key(semaphore_slot(name, 0))}) {
      EXPECT_TRUE(names_a_dlock_key(key)) << key;
    }
  }
  EXPECT_TRUE(names_a_dlock_key("dlock:max-ttl"));
  for (const char* name : {"job", "dlock:sem:{p}:0", "dlock:fences", "dlock:queued:{x}",
                           "dlock:release:{job}", "dlock", ""}) {
    EXPECT_FALSE(names_a_dlock_key(name)) << name;
  }
}

TEST(KeysTest, SemaphoreSlotsShareTheSemaphoresChannel) {
  EXPECT_EQ(semaphore_slot("downloads", 3), "dlock:sem:{downloads}:3");
  EXPECT_EQ(release_channel(semaphore_slot("downloads", 0)),
            "dlock:release:{downloads}:dlock:sem:{downloads}");
  EXPECT_EQ(release_channel(semaphore_slot("downloads", 17)),
            release_channel(semaphore_slot("downloads", 0)));
  EXPECT_NE(release_channel(semaphore_slot("downloads", 0)),
            release_channel(semaphore_slot("uploads", 0)));
}

TEST(KeysTest, SemaphoreNamesWithBracesAndColonsParseFromTheRight) {
  for (const char* name : {"a}:5", "{x}", "a:b:c", "}", ":", "x}:", "9"}) {
    const std::string slot = semaphore_slot(name, 12);
    EXPECT_EQ(semaphore_of_slot(slot), auxiliary_key("dlock:sem:", name)) << name;
    EXPECT_EQ(release_channel(slot), release_channel(semaphore_slot(name, 0))) << name;
  }
  // Two semaphores whose names differ only where a naive parse would cut stay apart.
  EXPECT_NE(release_channel(semaphore_slot("a}:5", 0)), release_channel(semaphore_slot("a", 0)));
}

// Issue 28: a semaphore's permit record, one per semaphore, in its slot; none for other names.
TEST(KeysTest, APermitRecordPerSemaphoreInItsSlot) {
  EXPECT_EQ(permit_record_key(semaphore_slot("downloads", 3)),
            "dlock:permits:{downloads}:dlock:sem:{downloads}");
  for (const char* name : {"downloads", "a}:5", "{x}", "a{b}c"}) {
    const std::string record = permit_record_key(semaphore_slot(name, 7));
    EXPECT_EQ(record, permit_record_key(semaphore_slot(name, 0))) << name;
    EXPECT_EQ(node::key_slot(record), node::key_slot(semaphore_slot(name, 0))) << name;
  }
  EXPECT_EQ(permit_record_key("downloads"), "");
  EXPECT_EQ(permit_record_key("dlock:sem:{x"), "");
}

// A fair semaphore's waiters queue once for all its slots.
TEST(KeysTest, SemaphoreSlotsShareTheSemaphoresQueue) {
  EXPECT_EQ(queue_key(semaphore_slot("downloads", 3)),
            "dlock:queue:{downloads}:dlock:sem:{downloads}");
  EXPECT_EQ(queue_alive_key(semaphore_slot("downloads", 3)),
            "dlock:queue-alive:{downloads}:dlock:sem:{downloads}");
  EXPECT_EQ(queue_key(semaphore_slot("a}:5", 1)), queue_key(semaphore_slot("a}:5", 0)));
  EXPECT_EQ(queue_key("job"), "dlock:queue:{job}");
  EXPECT_EQ(queue_alive_key("dlock:sem:{x}:1a"), "dlock:queue-alive:{x}:dlock:sem:{x}:1a");
}

TEST(KeysTest, OtherNamesKeepTheirOwnChannel) {
  for (const char* name : {"job", "dlock:sem:{x}", "dlock:sem:{x}:", "dlock:sem:{x}:1a",
                           "dlock:sem:x}:1", "dlock:sem:{}:", "sem:{x}:1", "dlock:sem:{x:1", ""}) {
    EXPECT_EQ(release_channel(name), auxiliary_key("dlock:release:", name)) << name;
  }
  EXPECT_EQ(release_channel("job"), "dlock:release:{job}");
}

// Names without braces keep the names every earlier version used.
TEST(KeysTest, NamesWithoutBracesKeepTheirKeyNames) {
  EXPECT_EQ(fence_key("orders"), "dlock:fence:{orders}");
  EXPECT_EQ(readers_key("orders"), "dlock:readers:{orders}");
  EXPECT_EQ(writers_waiting_key("a:b"), "dlock:writers-waiting:{a:b}");
  EXPECT_EQ(accepted_token_key("k"), "dlock:accepted:{k}");
}

// Known slots (CLUSTER KEYSLOT on Redis 7.0): the CRC16 and the hash-tag rule.
TEST(KeysTest, KeySlotsAreRedisClusters) {
  EXPECT_EQ(node::key_slot("a"), 15495);
  EXPECT_EQ(node::key_slot("b"), 3300);
  EXPECT_EQ(node::key_slot("123456789"), 12739);  // CRC16/XMODEM check value 0x31C3
  EXPECT_EQ(node::key_slot("{a}k"), 15495);
  EXPECT_EQ(node::key_slot("x{a}y{b}"), 15495);             // the first tag counts
  EXPECT_EQ(node::key_slot("{}a"), node::key_slot("{}a"));  // empty tag: whole key
  EXPECT_NE(node::key_slot("{}a"), node::key_slot("a"));
  EXPECT_EQ(node::hash_tag("a{b"), "");
  EXPECT_EQ(node::hash_tag("x{a{b}c"), "a{b");
}

TEST(KeysTest, EverySlotHasAShortTagOfItsOwn) {
  std::set<std::string> seen;
  for (std::uint32_t s = 0; s < node::kSlotCount; ++s) {
    const auto tag = node::slot_tag(static_cast<std::uint16_t>(s));
    ASSERT_FALSE(tag.empty());
    ASSERT_LE(tag.size(), 4U);
    ASSERT_EQ(tag.find_first_of("{}"), std::string_view::npos);
    ASSERT_EQ(node::key_slot(tag), s) << tag;
    seen.emplace(tag);
  }
  EXPECT_EQ(seen.size(), node::kSlotCount);
  EXPECT_EQ(node::slot_tag(node::key_slot("0")), "0");  // the first name in counting order
}

// A script may only touch keys of one slot: every key and channel of a name must be in the
// name's slot, whatever braces it holds (the old names broke this for "a{b}c", "}x", "a}b").
TEST(KeysTest, EveryKeyOfANameIsInItsSlot) {
  for (const char* name :
       {"job", "a{b}c", "{x}", "x{}", "{}x", "}", "{", "a}b", "a{b", "x{a{b}c", "{{}}", "}{",
        "a:b:c", "{user1000}.following", "{}", "dlock:sem:{x}:3", "dlock:sem:{}x:5", "😀{é}"}) {
    const auto slot = node::key_slot(name);
    for (const auto& key :
         {fence_key(name), readers_key(name), writers_waiting_key(name), queue_key(name),
          queue_alive_key(name), release_channel(name), accepted_token_key(name)}) {
      EXPECT_EQ(node::key_slot(key), slot) << name << " -> " << key;
    }
    // A semaphore's slots, their keys, its queue and its channel share one slot.
    const auto sem_slot = node::key_slot(semaphore_slot(name, 0));
    for (std::size_t i : {0, 1, 17}) {
      const std::string lock = semaphore_slot(name, i);
      EXPECT_EQ(semaphore_of_slot(lock), semaphore_of_slot(semaphore_slot(name, 0))) << name;
      for (const auto& key : {lock, fence_key(lock), queue_key(lock), release_channel(lock)}) {
        EXPECT_EQ(node::key_slot(key), sem_slot) << name << " -> " << key;
      }
    }
  }
}

// Distinct names never share an auxiliary key.
TEST(KeysTest, AuxiliaryKeysOfDistinctNamesDiffer) {
  const std::vector<std::string> names{"a",      "a}", "{a}", "{a}:a", "a}:a", "x}:{a}",
                                       "{0}:a}", "}",  "{}",  "0}:}",  "{a",   "a{"};
  std::set<std::string> keys;
  for (const auto& name : names) keys.insert(fence_key(name));
  EXPECT_EQ(keys.size(), names.size());
}

}  // namespace
}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
// The names of a lock's keys and channels (src/lock/keys.h): every slot of a semaphore
// publishes on its semaphore's one channel, and no other name is changed.
#include "lock/keys.h"

#include <gtest/gtest.h>

namespace dlock::lock {
namespace {

TEST(KeysTest, SemaphoreSlotsShareTheSemaphoresChannel) {
  EXPECT_EQ(semaphore_slot("downloads", 3), "dlock:sem:{downloads}:3");
  EXPECT_EQ(release_channel(semaphore_slot("downloads", 0)),
            "dlock:release:{dlock:sem:{downloads}}");
  EXPECT_EQ(release_channel(semaphore_slot("downloads", 17)),
            release_channel(semaphore_slot("downloads", 0)));
  EXPECT_NE(release_channel(semaphore_slot("downloads", 0)),
            release_channel(semaphore_slot("uploads", 0)));
}

TEST(KeysTest, SemaphoreNamesWithBracesAndColonsParseFromTheRight) {
  for (const char* name : {"a}:5", "{x}", "a:b:c", "}", ":", "x}:", "9"}) {
    const std::string slot = semaphore_slot(name, 12);
    EXPECT_EQ(semaphore_of_slot(slot), "dlock:sem:{" + std::string(name) + "}") << name;
    EXPECT_EQ(release_channel(slot), release_channel(semaphore_slot(name, 0))) << name;
  }
  // Two semaphores whose names differ only where a naive parse would cut stay apart.
  EXPECT_NE(release_channel(semaphore_slot("a}:5", 0)), release_channel(semaphore_slot("a", 0)));
}

// A fair semaphore's waiters queue once for all its slots.
TEST(KeysTest, SemaphoreSlotsShareTheSemaphoresQueue) {
  EXPECT_EQ(queue_key(semaphore_slot("downloads", 3)), "dlock:queue:{dlock:sem:{downloads}}");
  EXPECT_EQ(queue_alive_key(semaphore_slot("downloads", 3)),
            "dlock:queue-alive:{dlock:sem:{downloads}}");
  EXPECT_EQ(queue_key(semaphore_slot("a}:5", 1)), queue_key(semaphore_slot("a}:5", 0)));
  EXPECT_EQ(queue_key("job"), "dlock:queue:{job}");
  EXPECT_EQ(queue_alive_key("dlock:sem:{x}:1a"), "dlock:queue-alive:{dlock:sem:{x}:1a}");
}

TEST(KeysTest, OtherNamesKeepTheirOwnChannel) {
  for (const char* name : {"job", "dlock:sem:{x}", "dlock:sem:{x}:", "dlock:sem:{x}:1a",
                           "dlock:sem:x}:1", "dlock:sem:{}:", "sem:{x}:1", ""}) {
    EXPECT_EQ(release_channel(name), "dlock:release:{" + std::string(name) + "}") << name;
  }
}

}  // namespace
}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
// The wait's pure decisions (lock/wait.h): which refusals end a wait and with what error, and
// how long to nap before the next attempt. The wait task itself runs on real servers
// (tests/integration/waiting_test.cc, WaitTaskTest).
#include "lock/wait.h"

#include <gtest/gtest.h>

namespace dlock::lock {
namespace {

using namespace std::chrono_literals;

Error held() {
  return Error(errc::lock_held, "held by another owner", {NodeError{"node-a", {}, "taken"}});
}

Refusal held_for(std::chrono::milliseconds ttl) {
  return Refusal{held(), true, ttl, false};
}

TEST(WaitRetryTest, ContentionAndMissingAnswersAreWorthAnotherAttempt) {
  EXPECT_TRUE(retryable(held()));
  EXPECT_TRUE(retryable(Error(errc::quorum_not_reached, "2 of 5 answered")));
  EXPECT_TRUE(retryable(Error(errc::timeout, "no reply within 200 ms")));
  EXPECT_FALSE(retryable(Error(errc::invalid_argument, "another permit count")));
  EXPECT_FALSE(retryable(Error(errc::script_error, "ERR")));
  EXPECT_FALSE(retryable(Error(errc::not_owner, "not the owner")));
}

TEST(WaitRetryTest, ALockRefusalIsContendedOnlyWhenHeld) {
  const Refusal taken = refusal_of(Refused{held(), 900ms, true});
  EXPECT_TRUE(taken.contended);
  EXPECT_EQ(taken.holder_ttl, 900ms);
  EXPECT_TRUE(taken.writer_registered);
  const Refusal unanswered =
      refusal_of(Refused{Error(errc::quorum_not_reached, "x"), 900ms, false});
  EXPECT_FALSE(unanswered.contended);
  EXPECT_EQ(unanswered.holder_ttl, 900ms);
}

TEST(WaitStepTest, RetryableRefusalWithinTheWaitWaitsAgain) {
  EXPECT_FALSE(next_step(held(), false, true, false, "late"));
  EXPECT_FALSE(next_step(Error(errc::timeout, "slow"), false, true, false, "late"));
}

TEST(WaitStepTest, AFinalRefusalEndsTheWaitAsItIs) {
  auto e = next_step(Error(errc::invalid_argument, "bad"), false, true, false, "late");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->is(errc::invalid_argument));
  EXPECT_EQ(e->summary(), "bad");
}

TEST(WaitStepTest, CancellationWinsOverTheDeadline) {
  auto e = next_step(held(), true, true, true, "late");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->is(errc::cancelled));
}

TEST(WaitStepTest, ContentionPastTheDeadlineIsAWaitTimeoutNamingTheNodes) {
  auto e = next_step(held(), false, true, true, "lock 'job' still held after 300 ms");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->is(errc::wait_timeout));
  EXPECT_TRUE(is_contention(e->code()));
  EXPECT_EQ(e->summary(), "lock 'job' still held after 300 ms");
  ASSERT_EQ(e->nodes().size(), 1u);
  EXPECT_EQ(e->nodes()[0].node, "node-a");
}

TEST(WaitStepTest, NoQuorumPastTheDeadlineStaysNoQuorum) {
  // A broken cluster must not pass for a busy lock.
  auto e = next_step(Error(errc::quorum_not_reached, "1 of 3"), false, true, true, "late");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->is(errc::quorum_not_reached));
}

TEST(WaitStepTest, AWaitOfZeroIsOneAttemptWithItsOwnError) {
  auto e = next_step(held(), false, false, false, "late");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->is(errc::lock_held));  // as try_lock says it, not wait_timeout
}

TEST(WaitNapTest, AHeldLockIsWaitedForUntilItsKeyIsGone) {
  const NapPolicy policy{50ms, std::nullopt, false};
  EXPECT_EQ(next_nap(held_for(800ms), false, {}, policy, 7ms), 801ms);
}

TEST(WaitNapTest, ALostRaceAddsJitter) {
  const NapPolicy policy{50ms, std::nullopt, false};
  EXPECT_EQ(next_nap(held_for(800ms), true, {}, policy, 7ms), 808ms);
}

TEST(WaitNapTest, AnUnknownHolderTtlNapsTheRetryDelayWithJitter) {
  const NapPolicy policy{50ms, std::nullopt, false};
  EXPECT_EQ(next_nap(Refusal{held(), true, std::nullopt, false}, false, {}, policy, 7ms), 57ms);
}

TEST(WaitNapTest, AnUnansweredAttemptNapsTheRetryDelayWhateverTheTtl) {
  // Not contended: no release message will come, a holder's ttl from a minority means nothing.
  const NapPolicy policy{50ms, std::nullopt, false};
  const Refusal unanswered{Error(errc::quorum_not_reached, "x"), false, 10s, false};
  EXPECT_EQ(next_nap(unanswered, false, {}, policy, 7ms), 50ms);
  EXPECT_EQ(next_nap(unanswered, true, {}, policy, 7ms), 57ms);
}

TEST(WaitNapTest, JitterEveryNapAddsItAlways) {
  const NapPolicy policy{50ms, std::nullopt, true};
  EXPECT_EQ(next_nap(held_for(800ms), false, {}, policy, 7ms), 808ms);
}

TEST(WaitNapTest, AFairWaiterChecksInWithinAThirdOfTheQueueTimeout) {
  const NapPolicy policy{50ms, 3000ms, false};
  EXPECT_EQ(next_nap(held_for(60s), false, {}, policy, 7ms), 1000ms);
  EXPECT_EQ(next_nap(held_for(200ms), false, {}, policy, 7ms), 201ms);
}

TEST(WaitNapTest, ARegisteredWriterComesBackWithinAThirdOfItsRegistration) {
  const NapPolicy policy{50ms, std::nullopt, false};
  EXPECT_EQ(next_nap(held_for(60s), false, WriterWait{900ms, true}, policy, 7ms), 300ms);
  // Not registered yet: nothing to keep alive.
  EXPECT_EQ(next_nap(held_for(60s), false, WriterWait{900ms, false}, policy, 7ms), 60001ms);
}

TEST(WaitNapTest, JitterStaysWithinItsBase) {
  for (int i = 0; i < 1000; ++i) {
    const auto j = jitter(20ms);
    ASSERT_GE(j, 0ms);
    ASSERT_LE(j, 20ms);
  }
  for (int i = 0; i < 100; ++i) ASSERT_LE(jitter(0ms), 1ms);
}

}  // namespace
}  // namespace dlock::lock

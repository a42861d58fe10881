// SPDX-License-Identifier: MIT
// The quorum decisions, fed canned and adversarial node outcomes: lost replies, calls never
// sent, error replies, odd shapes, quarantined nodes, stale holds.
#include "lock/tally.h"

#include <gtest/gtest.h>

namespace dlock::lock {
namespace {

using namespace std::chrono_literals;
using Kind = AcquireReply::Kind;
using Clock = std::chrono::steady_clock;

resp::Reply integer(std::int64_t v) {
  resp::Reply r;
  r.type = resp::Reply::Type::integer;
  r.integer = v;
  return r;
}

resp::Reply array(std::vector<std::int64_t> values) {
  resp::Reply r;
  r.type = resp::Reply::Type::array;
  for (auto v : values) r.elements.push_back(integer(v));
  return r;
}

resp::Reply error_reply(std::string text) {
  resp::Reply r;
  r.type = resp::Reply::Type::error;
  r.str = std::move(text);
  return r;
}

Result<resp::Reply> lost() {
  return Error(errc::timeout, "no answer");
}

// acquire.lua's grant: the bare token.
AcquireReply granted(std::uint64_t counter) {
  return parse_acquire(integer(static_cast<std::int64_t>(counter)));
}

AcquireReply held(std::uint64_t counter, std::int64_t pttl) {
  return parse_acquire(array({0, static_cast<std::int64_t>(counter), pttl}));
}

TEST(TallyTest, ParsesEachAcquireReply) {
  EXPECT_EQ(granted(7).kind, Kind::granted);
  EXPECT_EQ(granted(7).counter, 7u);
  // fair_acquire.lua's grant is a table.
  EXPECT_EQ(parse_acquire(array({1, 9, 0})).kind, Kind::granted);
  EXPECT_EQ(parse_acquire(array({1, 9, 0})).counter, 9u);
  const auto h = held(3, 1500);
  EXPECT_EQ(h.kind, Kind::held);
  EXPECT_EQ(h.holder_ttl, 1500);
  EXPECT_EQ(parse_acquire(lost()).kind, Kind::failed);
  EXPECT_TRUE(parse_acquire(lost()).error.is(errc::timeout));
  const auto refused = parse_acquire(error_reply("NOPERM no permissions"));
  EXPECT_EQ(refused.kind, Kind::failed);
  EXPECT_TRUE(refused.error.is(errc::script_error));
  // Shapes that are not the script's: short, negative counter, unknown status (the old
  // "reentered" status 2 included: a node never decides reentrancy).
  EXPECT_EQ(parse_acquire(array({1, 5})).kind, Kind::failed);
  EXPECT_EQ(parse_acquire(array({1, -1, 0})).kind, Kind::failed);
  EXPECT_EQ(parse_acquire(array({2, 5, 2})).kind, Kind::failed);
  EXPECT_EQ(parse_acquire(integer(0)).kind, Kind::failed) << "tokens start at 1";
  EXPECT_EQ(parse_acquire(integer(-1)).kind, Kind::failed);
}

// Issue 28: a node that recorded another permit count for the semaphore refuses; one such node
// fails the attempt, even beside a quorum of grants.
TEST(TallyTest, AnotherRecordedPermitCountOnAnyNodeFailsTheAttempt) {
  const auto mismatch = parse_acquire(array({-1, 4, 2}));
  EXPECT_EQ(mismatch.kind, Kind::mismatch);
  EXPECT_EQ(mismatch.permits, 2);
  EXPECT_EQ(parse_acquire(array({-1, 4, 0})).kind, Kind::failed) << "a count of 0 is no count";
  const auto t = tally_acquire({granted(5), granted(5), mismatch}, {true, true, true}, 2);
  EXPECT_EQ(t.granted, 2u);
  ASSERT_TRUE(t.recorded_permits);
  EXPECT_EQ(*t.recorded_permits, 2);
  EXPECT_FALSE(
      tally_acquire({granted(5), granted(5), held(4, 10)}, {true, true, true}, 2).recorded_permits);
}

TEST(TallyTest, UnequalCountersNeedARaise) {
  // The counters: 11, 11, 10, 10, 10, all granted: the token is 11, held by 2 of 5.
  const auto t = tally_acquire({granted(11), granted(11), granted(10), granted(10), granted(10)},
                               {true, true, true, true, true}, 3);
  EXPECT_EQ(t.granted, 5u);
  EXPECT_EQ(t.token, 11u);
  EXPECT_FALSE(t.token_on_quorum);
}

TEST(TallyTest, EqualCountersOnAQuorumNeedNoRaise) {
  const auto t =
      tally_acquire({granted(10), granted(10), granted(10), parse_acquire(lost()), held(9, 100)},
                    {true, true, true, true, true}, 3);
  EXPECT_EQ(t.granted, 3u);
  EXPECT_EQ(t.held, 1u);
  EXPECT_EQ(t.token, 10u);
  EXPECT_TRUE(t.token_on_quorum);
  EXPECT_EQ(t.holder_ttl, 100ms);
}

// Only a voting node that granted may confirm a raise of the token (simulation finding 10).
TEST(TallyTest, OnlyVotingGrantingNodesMayConfirmARaise) {
  EXPECT_EQ(
      granting_voters({granted(5), parse_acquire(lost()), granted(3), held(4, 100), granted(9)},
                      {true, true, true, true, false}),
      (std::vector<bool>{true, false, true, false, false}));
}

// A refusing node whose key never expires (another library's) makes the holder's time left
// unknown: the name may never free, whatever the other nodes' ttls say.
TEST(TallyTest, AHolderKeyWithoutTtlOnAnyRefusingNodeIsMarked) {
  const auto mixed = tally_acquire({held(9, 100), held(9, -1), granted(10)}, {true, true, true}, 2);
  EXPECT_EQ(mixed.held, 2u);
  EXPECT_EQ(mixed.holder_ttl, 100ms);
  EXPECT_TRUE(mixed.holder_without_ttl);
  const auto timed =
      tally_acquire({held(9, 100), held(9, 300), granted(10)}, {true, true, true}, 2);
  EXPECT_EQ(timed.holder_ttl, 300ms);
  EXPECT_FALSE(timed.holder_without_ttl);
}

// Issue 28: a granting node behind the token is raised even when the token is on a quorum
// already, a quarantined one too (its counter counts for the next token).
TEST(TallyTest, AGrantingNodeBehindTheTokenIsRaisedEvenWithTheTokenOnAQuorum) {
  const auto t = tally_acquire({granted(10), granted(10), granted(4)}, {true, true, true}, 2);
  EXPECT_TRUE(t.token_on_quorum);
  EXPECT_TRUE(t.granted_below);
  EXPECT_TRUE(
      tally_acquire({granted(10), granted(10), granted(4)}, {true, true, false}, 2).granted_below);
  const auto level = tally_acquire({granted(10), granted(10), held(4, 10)}, {true, true, true}, 2);
  EXPECT_FALSE(level.granted_below) << "a refusing node is not a granting one";
  EXPECT_FALSE(
      tally_acquire({granted(10), granted(10), parse_acquire(lost())}, {true, true, true}, 2)
          .granted_below);
}

TEST(TallyTest, ARefusingNodesCounterIsExceeded) {
  // The holder's token may be the refusing node's counter: ours must be larger.
  const auto t = tally_acquire({granted(5), granted(5), held(5, 10)}, {true, true, true}, 2);
  EXPECT_EQ(t.token, 6u);
  EXPECT_FALSE(t.token_on_quorum);
}

TEST(TallyTest, QuarantinedNodesDoNotVoteButTheirCountersCount) {
  const auto t = tally_acquire({granted(3), granted(8), granted(3)}, {true, false, true}, 2);
  EXPECT_EQ(t.granted, 2u);
  EXPECT_EQ(t.token, 8u) << "a counter seen anywhere must not be handed out again";
  EXPECT_FALSE(t.token_on_quorum);
}

TEST(TallyTest, LostAndNeverSentRepliesAreNotVotes) {
  const auto t = tally_acquire(
      {granted(1), parse_acquire(lost()), parse_acquire(Error(errc::io_error, "not sent"))},
      {true, true, true}, 2);
  EXPECT_EQ(t.granted, 1u);
  EXPECT_EQ(t.held, 0u);
}

TEST(TallyTest, ReleaseRepliesAreFreedNotHeldOrFailed) {
  EXPECT_EQ(parse_release(integer(3)).kind, ReleaseReply::Kind::freed);
  EXPECT_EQ(parse_release(integer(3)).listeners, 3);
  EXPECT_EQ(parse_release(integer(0)).kind, ReleaseReply::Kind::freed);
  EXPECT_EQ(parse_release(integer(-1)).kind, ReleaseReply::Kind::not_held);
  EXPECT_EQ(parse_release(integer(-2)).kind, ReleaseReply::Kind::failed);
  EXPECT_EQ(parse_release(array({1, 3})).kind, ReleaseReply::Kind::failed) << "not release.lua's";
  EXPECT_TRUE(release_freed(integer(0)));
  EXPECT_FALSE(release_freed(integer(-1)));
  EXPECT_EQ(parse_release(lost()).kind, ReleaseReply::Kind::failed);
  EXPECT_EQ(parse_release(Error(errc::cancelled, "not waited for")).kind,
            ReleaseReply::Kind::failed);
}

TEST(TallyTest, RenewRepliesPerSlot) {
  const auto batch = array({1, 0, 1});
  EXPECT_EQ(parse_renew(batch, 0), RenewReply::renewed);
  EXPECT_EQ(parse_renew(batch, 1), RenewReply::not_held);
  EXPECT_EQ(parse_renew(batch, 3), RenewReply::failed);
  EXPECT_EQ(parse_renew(lost(), 0), RenewReply::failed);
  EXPECT_EQ(parse_renew(error_reply("BUSY"), 0), RenewReply::failed);
}

TEST(TallyTest, ExtensionJudgement) {
  const auto start = Clock::now();
  const auto valid_until = start + 1s;
  // A quorum within the ttl.
  EXPECT_EQ(judge_extension(3, 0, 3, 1000ms, 0.01, start, start + 10ms, valid_until),
            Extension::extended);
  // Validity ended before the answers came: expired, whatever they say...
  EXPECT_EQ(judge_extension(5, 0, 3, 1000ms, 0.01, start, valid_until, valid_until),
            Extension::expired);
  // ...unless a quorum said the hold is not there: that is lost, a quorum's word.
  EXPECT_EQ(judge_extension(1, 1, 3, 1000ms, 0.01, start, valid_until, valid_until),
            Extension::lost);
  // Too few confirmed, but unanswered nodes may still hold it.
  EXPECT_EQ(judge_extension(2, 1, 3, 1000ms, 0.01, start, start + 10ms, valid_until),
            Extension::no_quorum);
  // A quorum answered that the hold is not there.
  EXPECT_EQ(judge_extension(2, 0, 3, 1000ms, 0.01, start, start + 10ms, valid_until),
            Extension::lost);
  // A quorum, but later than the new ttl allows.
  EXPECT_EQ(judge_extension(3, 0, 3, 100ms, 0.01, start, start + 99ms, valid_until),
            Extension::no_quorum);
}

TEST(TallyTest, HelloTakesTheYoungestBootAndTheLargestTtl) {
  // Five nodes, two greeted (nodes 0 and 4); one reply of the wrong shape; one lost.
  const std::vector<Result<resp::Reply>> replies{
      array({30000, 1, -1, 5000, 7}), array({60000, 1, -1, 2000, 9}), array({1000, 1, 3, 0}),
      lost(), array({10000, 1, -1, -1, 0})};
  const BootReport r = tally_hello(replies, {0, 4});
  EXPECT_EQ(r.told, 3u);
  EXPECT_EQ(r.max_ttl, 60000ms);
  EXPECT_FALSE(r.boot_age[0]);
  ASSERT_TRUE(r.boot_age[1]);
  EXPECT_EQ(*r.boot_age[1], 2000ms) << "the shortest age gives the longest quarantine";
  EXPECT_TRUE(r.answered[0] && r.answered[1]);
  EXPECT_TRUE(r.in_use[0] && r.in_use[1]);
  EXPECT_EQ(r.floors, (std::vector<std::uint64_t>{7, 9, 0, 0, 0}));
  EXPECT_EQ(r.largest_floor, 9u);
}

TEST(TallyTest, HelloTellsANodesOwnReportFromOthers) {
  // Node 0 reports its own boot (a lone HA node's replicated records); node 1 reports node 2's.
  const std::vector<Result<resp::Reply>> replies{array({1000, 1, 100, -1, -1, 0}),
                                                 array({1000, 1, -1, -1, 300, 0}),
                                                 array({0, 0, -1, -1, -1, 0})};
  const BootReport r = tally_hello(replies, {0, 1, 2});
  EXPECT_EQ(*r.boot_age[0], 100ms);
  EXPECT_FALSE(r.age_by_others[0]) << "its own report only";
  EXPECT_EQ(*r.age_by_others[2], 300ms);
  EXPECT_FALSE(r.in_use[2]);
  EXPECT_TRUE(r.any_in_use);
}

// An answer of a given shape: greeted node k answered (in use or not), and who reported its boot.
BootReport report_of(std::vector<int> states, std::chrono::milliseconds max_ttl = 1000ms) {
  // states[k]: 0 no answer, 1 in use, 2 in use but reported booted 100 ms ago by another node,
  // 3 not in use, 4 not in use and reported booted by another node.
  BootReport r;
  r.max_ttl = max_ttl;
  for (const int s : states) {
    r.answered.push_back(s != 0);
    r.in_use.push_back(s == 1 || s == 2);
    r.boot_age.push_back(s == 2 || s == 4 ? std::optional(100ms) : std::nullopt);
    r.age_by_others.push_back(r.boot_age.back());
    r.told += s != 0;
    r.any_in_use = r.any_in_use || s == 1 || s == 2;
  }
  return r;
}

TEST(TallyTest, AGreetingCountsOnlyMembersNotRestartedRecently) {
  // Two members answer: trusted.
  EXPECT_TRUE(judge_greeting(report_of({1, 1, 0}), 3, 2, false).trusted);
  // Finding 6's sibling: a member and the restarted node (reported by it): the restarted one's
  // answer knows no ttl; only one answer counts. Waits for the node that remembers.
  EXPECT_FALSE(judge_greeting(report_of({4, 1, 0}), 3, 2, false).trusted);
  // Finding 2: the restarted node (empty) and a node never made a member: no member answers,
  // and not every node did.
  const auto finding2 = judge_greeting(report_of({3, 0, 3}), 3, 2, false);
  EXPECT_FALSE(finding2.trusted);
  EXPECT_TRUE(finding2.brand_new);
  // One member, and one node no member ever saw boot (never a member): at most two nodes can
  // hold leases, and the member is in every quorum of them.
  EXPECT_TRUE(judge_greeting(report_of({1, 0, 3}), 3, 2, false).trusted);
  // One member, and a node it saw boot (a restart, or a new node not yet past the ttl).
  EXPECT_FALSE(judge_greeting(report_of({1, 0, 4}), 3, 2, false).trusted);
  // A member reported booted long ago (past the largest ttl) counts again.
  EXPECT_TRUE(judge_greeting(report_of({2, 1, 0}, 50ms), 3, 2, false).trusted);
  EXPECT_FALSE(judge_greeting(report_of({2, 1, 0}, 1000ms), 3, 2, false).trusted);
  // Five nodes: three members needed when nobody is known to be fresh.
  EXPECT_FALSE(judge_greeting(report_of({1, 1, 4, 0, 0}), 5, 3, false).trusted);
  EXPECT_TRUE(judge_greeting(report_of({1, 1, 1, 0, 0}), 5, 3, false).trusted);
  EXPECT_TRUE(judge_greeting(report_of({1, 1, 3, 0, 0}), 5, 3, false).trusted);
}

TEST(TallyTest, ABrandNewSetStartsWhenEveryNodeAnswersOrWithTheOptIn) {
  EXPECT_TRUE(judge_greeting(report_of({3, 3, 3}), 3, 2, false).trusted);
  EXPECT_FALSE(judge_greeting(report_of({3, 3, 0}), 3, 2, false).trusted);
  EXPECT_TRUE(judge_greeting(report_of({3, 3, 0}), 3, 2, true).trusted);
  EXPECT_FALSE(judge_greeting(report_of({3, 0, 0}), 3, 2, true).trusted) << "not even a quorum";
  // A lone node: its own answer.
  EXPECT_TRUE(judge_greeting(report_of({3}), 1, 1, false).trusted);
  EXPECT_TRUE(judge_greeting(report_of({1}), 1, 1, false).trusted);
}

// A largest ttl or a holder's ttl that an older client left on a node (it accepted any ttl) is
// capped before deadlines are computed from it: no time_point overflow.
TEST(TallyTest, NodeDurationsAreCappedAtTenYears) {
  constexpr std::int64_t kHuge = 1'000'000'000'000'000;  // ms: about 31,700 years
  const BootReport r = tally_hello({array({kHuge, 1, -1, 0})}, {0});
  EXPECT_EQ(r.max_ttl, std::chrono::hours(24 * 365 * 10));
}

}  // namespace
}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
// The checker must catch what it exists to catch: planted overlaps, stale tokens accepted, lost
// updates, and waits that failed while nothing was wrong.
#include "history.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace dlock::chaos {
namespace {

constexpr std::int64_t kMs = 1'000'000;

Event cycle(const std::string& holder, std::uint64_t token, std::int64_t acquire_ms,
            std::int64_t release_ms, const std::string& outcome = "accepted") {
  Event e;
  e.name = "n";
  e.holder = holder;
  e.token = token;
  e.wait_ns = acquire_ms * kMs;
  e.acquire_ns = acquire_ms * kMs;
  e.valid_until_ns = (acquire_ms + 500) * kMs;
  e.release_ns = release_ms * kMs;
  e.outcome = outcome;
  return e;
}

History clean() {
  History h;
  h.drift_ms = 7;
  h.ttl_ms = 500;
  h.wait_bound_ms = 10000;
  h.events = {cycle("a", 1, 0, 10), cycle("b", 2, 12, 20), cycle("a", 3, 25, 30)};
  h.counter = 3;
  return h;
}

TEST(HistoryCheckTest, CleanHistoryPasses) {
  const Report r = check(clean());
  EXPECT_TRUE(r.violations.empty());
  EXPECT_EQ(r.accepted, 3u);
}

Event read(const std::string& holder, std::uint64_t token, std::int64_t acquire_ms,
           std::int64_t release_ms) {
  Event e = cycle(holder, token, acquire_ms, release_ms, "held");
  e.shared = true;
  return e;
}

// Readers (dlock::SharedMutex, the --readers workers) may overlap each other, never a writer.
TEST(HistoryCheckTest, ReadersMayOverlapEachOtherButNeverAWriter) {
  History h = clean();
  h.events.push_back(read("r1", 4, 100, 200));
  h.events.push_back(read("r2", 5, 120, 150));
  h.events.push_back(read("r3", 6, 160, 210));
  h.events.push_back(cycle("w", 7, 215, 220));
  h.counter = 4;
  const Report r = check(h);
  EXPECT_TRUE(r.violations.empty()) << r.violations[0];

  // A writer inside a reader's window, also when a reader that began later has ended already.
  h.events.push_back(read("r4", 8, 300, 400));
  h.events.push_back(read("r5", 9, 310, 320));
  h.events.push_back(cycle("w", 10, 350, 360));
  h.counter = 5;
  const Report bad = check(h);
  ASSERT_EQ(bad.violations.size(), 1u);
  EXPECT_NE(bad.violations[0].find("r4"), std::string::npos) << bad.violations[0];
  EXPECT_NE(bad.violations[0].find("reader"), std::string::npos) << bad.violations[0];

  // And a reader inside a writer's window.
  History h2 = clean();
  h2.events.push_back(cycle("w", 4, 100, 200));
  h2.events.push_back(read("r", 5, 150, 160));
  h2.counter = 4;
  EXPECT_EQ(check(h2).violations.size(), 1u);
}

Event permit(const std::string& holder, const std::string& slot, std::uint64_t token,
             std::int64_t acquire_ms, std::int64_t release_ms) {
  Event e = cycle(holder, token, acquire_ms, release_ms, "held");
  e.name = "sem";
  e.permits = 2;
  e.slot = slot;
  return e;
}

// Permit holders (dlock::Semaphore, the --permit-holders workers): up to `permits` at once,
// one per slot.
TEST(HistoryCheckTest, PermitHoldersOverlapUpToThePermitCountOnePerSlot) {
  History h = clean();
  h.events.push_back(permit("p1", "s0", 1, 100, 200));
  h.events.push_back(permit("p2", "s1", 1, 120, 150));
  h.events.push_back(permit("p3", "s1", 2, 160, 210));  // p2's slot, after p2
  h.events.push_back(permit("p2", "s0", 2, 205, 230));  // p1's slot, after p1
  const Report r = check(h);
  EXPECT_TRUE(r.violations.empty()) << r.violations[0];

  // A third holder while two hold, on a slot of its own: (d).
  History three = h;
  three.events.push_back(permit("p4", "s2", 1, 170, 180));
  const Report r3 = check(three);
  ASSERT_EQ(r3.violations.size(), 1u);
  EXPECT_NE(r3.violations[0].find("more than 2 holders of 'sem'"), std::string::npos)
      << r3.violations[0];

  // Two holders of one slot: (a), though the count is within bounds.
  History same_slot = clean();
  same_slot.events.push_back(permit("p1", "s0", 1, 100, 200));
  same_slot.events.push_back(permit("p2", "s0", 2, 150, 160));
  const Report rs = check(same_slot);
  ASSERT_EQ(rs.violations.size(), 1u);
  EXPECT_NE(rs.violations[0].find("overlapping holders of 's0'"), std::string::npos)
      << rs.violations[0];

  // The fields survive the round trip through a history line.
  const std::string path = ::testing::TempDir() + "/permits.jsonl";
  {
    std::ofstream out(path);
    for (const auto& e : three.events) out << to_line(e) << "\n";
  }
  const History back = read_history(path);
  ASSERT_EQ(back.events.size(), three.events.size());
  EXPECT_EQ(back.events.back().permits, 2u);
  EXPECT_EQ(back.events.back().slot, "s2");
  std::remove(path.c_str());
}

TEST(HistoryCheckTest, CatchesAPlantedOverlap) {
  History h = clean();
  h.events[0] = cycle("a", 1, 0, 40);
  h.events[1] = cycle("b", 2, 5, 50);  // b acquires while a still holds (a released at 40)
  h.events[2] = cycle("a", 3, 55, 60);
  const Report r = check(h);
  ASSERT_FALSE(r.violations.empty());
  EXPECT_NE(r.violations[0].find("overlapping holders"), std::string::npos) << r.violations[0];
}

// A nesting worker that wrote nothing still held the lock: another holder inside its window is
// an overlap (the bug of a shorter inner lease that ended the lock under the outer one).
TEST(HistoryCheckTest, CatchesAnOverlapWithAHolderThatWroteNothing) {
  History h = clean();
  Event nested = cycle("n", 4, 100, 1500, "held");
  nested.valid_until_ns = 2000 * kMs;  // an outer lease of 2 s, still valid at the end
  nested.detail = "nest outer=2000ms/fixed inner=300ms/fixed extend() inner-first";
  h.events.push_back(nested);
  h.events.push_back(cycle("b", 5, 700, 710));  // took the lock while n believed it held it
  h.counter = 4;
  const Report r = check(h);
  EXPECT_EQ(r.held_only, 1u);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("overlapping holders"), std::string::npos) << r.violations[0];
  EXPECT_NE(r.violations[0].find("inner=300ms"), std::string::npos) << "the nesting is named";
  EXPECT_EQ(r.overlapped_windows, 1u);
}

TEST(HistoryCheckTest, HolderThatWroteNothingIsNoLateWriterAndNoOverlapAfterItsWindow) {
  History h = clean();
  Event nested = cycle("n", 4, 100, 400, "held");  // believed held until 400
  nested.valid_until_ns = 2000 * kMs;
  h.events.push_back(nested);
  h.events.push_back(cycle("b", 5, 420, 430));
  h.counter = 4;
  const Report r = check(h);
  EXPECT_TRUE(r.violations.empty()) << r.violations[0];
  EXPECT_EQ(r.expected_overlaps, 0u);
}

TEST(HistoryCheckTest, CatchesAStaleTokenAccepted) {
  History h = clean();
  h.events[2].token = 1;  // accepted after token 2 was accepted
  const Report r = check(h);
  bool found = false;
  for (const auto& v : r.violations)
    found = found || v.find("accepted token 1 after 2") != std::string::npos;
  EXPECT_TRUE(found);
}

// Seed 9901 of the 10-minute profile: the skewed worker's late write (token 1) was sent before
// a newer holder (token 2) read and wrote, and its answer came after the newer holder's. The
// resource accepted them in token order (it would have refused token 1 after the read of 2);
// only the order of the answers was inverted.
TEST(HistoryCheckTest, AWriteAnsweredLaterButSentFirstWasAcceptedFirst) {
  History h = clean();
  h.events.clear();
  Event late = cycle("skewed", 1, 0, 611);
  late.skewed = true;
  late.valid_until_ns = 481 * kMs;
  late.write_ns = 600 * kMs;
  Event newer = cycle("w", 2, 606, 608);
  newer.read_ns = 606 * kMs;
  newer.write_ns = 607 * kMs;
  h.events = {late, newer};
  h.counter = 2;
  Report r = check(h);
  EXPECT_TRUE(r.violations.empty()) << r.violations[0];
  EXPECT_EQ(r.harmless_late_writes, 1u);
  // Sent after the newer write was answered: surely accepted after it (and after the newer
  // holder's read, which the late-write rule reports too).
  h.events[0].write_ns = 609 * kMs;
  r = check(h);
  bool found = false;
  for (const auto& v : r.violations)
    found = found || v.starts_with("resource accepted token 1 after 2");
  EXPECT_TRUE(found);
}

// A stale token accepted is caught against every write answered before it was sent, not only
// the one answered just before it.
TEST(HistoryCheckTest, CatchesAStaleTokenAcceptedAfterSeveralWrites) {
  History h = clean();
  h.events.push_back(cycle("c", 9, 40, 50));
  h.events.push_back(cycle("d", 10, 60, 70));
  Event stale = cycle("e", 5, 80, 90);  // below 9 and 10, both answered before it was sent
  stale.write_ns = 85 * kMs;
  h.events.push_back(stale);
  h.counter = 6;
  const Report r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("accepted token 5 after 10"), std::string::npos)
      << r.violations[0];
}

TEST(HistoryCheckTest, CatchesALostUpdate) {
  History h = clean();
  h.counter = 2;
  const Report r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("counter is 2"), std::string::npos);
}

// A fenced write whose answer never came (the resource was slow: "error" after write_ns) may
// have been applied: the counter may be one higher, never two.
TEST(HistoryCheckTest, AWriteWithoutAnAnswerMayHaveBeenApplied) {
  History h = clean();
  Event unanswered = cycle("w", 9, 40, 45, "error");
  unanswered.write_ns = 42 * kMs;
  h.events.push_back(unanswered);
  h.counter = 4;
  EXPECT_TRUE(check(h).violations.empty());
  h.counter = 3;
  EXPECT_TRUE(check(h).violations.empty());
  h.counter = 5;
  EXPECT_FALSE(check(h).violations.empty()) << "two more than accepted, one unanswered";
}

TEST(HistoryCheckTest, PausedHolderRefusedIsCaughtByFencingNotAViolation) {
  History h = clean();
  Event late = cycle("p", 4, 40, 2000, "refused");  // wrote long after its validity
  late.paused = true;
  h.events.push_back(late);
  h.events.push_back(cycle("b", 5, 700, 710));
  h.counter = 4;
  const Report r = check(h);
  EXPECT_TRUE(r.violations.empty()) << r.violations[0];
  EXPECT_EQ(r.expected_overlaps, 1u);
  EXPECT_EQ(r.caught_by_fencing, 1u);
}

TEST(HistoryCheckTest, PausedHolderAcceptedAfterANewerReadIsAViolation) {
  History h = clean();
  Event late = cycle("p", 4, 40, 2000, "accepted");
  late.paused = true;
  h.events.push_back(late);
  Event newer = cycle("b", 5, 700, 710);
  newer.read_ns = 701 * kMs;  // read before the late write at 2000
  h.events.push_back(newer);
  h.counter = 5;
  const Report r = check(h);
  ASSERT_FALSE(r.violations.empty());
}

TEST(HistoryCheckTest, PausedHolderAcceptedBeforeAnyNewerReadIsHarmless) {
  History h = clean();
  Event late = cycle("p", 4, 40, 2000, "accepted");
  late.paused = true;
  h.events.push_back(late);
  Event newer = cycle("b", 5, 700, 2100);
  newer.read_ns = 2050 * kMs;  // acquired during the pause, read after the late write
  h.events.push_back(newer);
  h.counter = 5;
  const Report r = check(h);
  EXPECT_TRUE(r.violations.empty());
  EXPECT_EQ(r.harmless_late_writes, 1u);
}

// The chaos CI run flagged this (a skewed holder's write sent before the newer holder's read
// returned): the resource may have accepted it first, which is harmless.
TEST(HistoryCheckTest, LateWriteSentBeforeANewerReadReturnedIsNotAViolation) {
  History h = clean();
  Event late = cycle("p", 4, 40, 2000, "accepted");
  late.skewed = true;
  late.write_ns = 1990 * kMs;  // sent at 1990, returned at 2000
  h.events.push_back(late);
  Event newer = cycle("b", 5, 700, 2100);
  newer.read_ns = 1995 * kMs;  // returned between the two
  h.events.push_back(newer);
  h.counter = 5;
  EXPECT_TRUE(check(h).violations.empty());
  late.write_ns = 1996 * kMs;  // sent after the newer read returned: a violation
  h.events[0] = late;
  EXPECT_FALSE(check(h).violations.empty());
}

TEST(HistoryCheckTest, TimeoutOutsideFaultsIsALivenessViolation) {
  History h = clean();
  h.events.push_back(cycle("w", 0, 100, 10100, "timeout"));
  EXPECT_EQ(check(h).violations.size(), 1u);
  h.faults.push_back(Fault{"kill", "node-1", 5000 * kMs, 6000 * kMs});
  EXPECT_TRUE(check(h).violations.empty()) << "a wait during a fault is excused";
}

TEST(HistoryCheckTest, AFailedWaitIsExcusedOnlyWhenItsWorkerWasStarvedForATenthOfIt) {
  // A client that cannot run gets no lock: a wait of 10 s whose own worker process lost 1 s or
  // more to starvation is excused (counted and listed); less is still a violation, and so is
  // another worker's starvation (the async workers starve themselves in most windows of a CI
  // run). Starvation is no fault: it excuses nothing else (the hand-off rule below, and
  // OneHolderTakingANameOverAndOverWhileAnotherWaitsIsAViolation).
  History h = clean();
  h.events.push_back(cycle("worker-3", 0, 100, 10100, "timeout"));
  // Two periods that overlap count once: the union.
  h.faults.push_back(Fault{kStarved, starved_target(3), 2000 * kMs, 2600 * kMs});
  h.faults.push_back(Fault{kStarved, starved_target(3), 2100 * kMs, 2500 * kMs});
  h.faults.push_back(Fault{kStarved, starved_target(3), 9900 * kMs, 10300 * kMs});  // 200 inside
  h.faults.push_back(Fault{kStarved, starved_target(4), 3000 * kMs, 9000 * kMs});
  h.faults.push_back(Fault{kStarved, starved_target(33), 3000 * kMs, 9000 * kMs});
  auto r = check(h);
  EXPECT_EQ(r.violations.size(), 1u) << "800 ms of 10 s is not a tenth; others' is no excuse";
  EXPECT_EQ(r.starved_timeouts, 0u);
  h.faults.push_back(Fault{kStarved, starved_target(3), 5000 * kMs, 5200 * kMs});
  r = check(h);
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_EQ(r.starved_timeouts, 1u);
  ASSERT_EQ(r.excused.size(), 1u);
  EXPECT_NE(r.excused[0].find("1000 ms"), std::string::npos) << r.excused[0];
  // An async worker's holder names its process the same way.
  h.events.back().holder = "async-3.5";
  EXPECT_TRUE(check(h).violations.empty());
  h.events.back().holder = "worker-3";
  // Excused as a timeout, a wait is still held to the hand-off rule: others took the lock 200
  // times while no fault ran (a waiter that stopped hearing releases).
  for (long k = 0; k < kStarvedHandOffs; ++k) {
    h.events.push_back(cycle(k % 2 ? "worker-1" : "worker-2", static_cast<std::uint64_t>(10 + k),
                             200 + 40 * k, 210 + 40 * k));
  }
  h.counter += kStarvedHandOffs;
  r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("while others took it"), std::string::npos) << r.violations[0];
}

TEST(HistoryCheckTest, ALivenessViolationNamesTheHoldsSampledDuringTheWait) {
  // The hold that kept the waiter out, mapped to the worker whose events name its owner, the
  // most often seen first; a sample of another name, or outside the wait, is not listed; a
  // sample with no hold on any node that answered counts as free (one where none answered does
  // not).
  History h = clean();
  h.events[0].owner = "p1:7";
  h.events.push_back(cycle("w", 0, 100, 10100, "timeout"));
  for (std::int64_t at : {50, 2000, 3000}) {
    h.samples.push_back(Sample{
        at * kMs,
        "n",
        {SampledHold{0, false, "p1:7", "h.9", 400}, SampledHold{2, false, "p1:7", "h.9", 350}}});
  }
  h.samples.push_back(Sample{4000 * kMs, "n", {SampledHold{1, true, "p2:3", "h.4", 120}}});
  h.samples.push_back(Sample{5000 * kMs, "other", {SampledHold{1, false, "p3:1", "h.1", 90}}});
  h.samples.push_back(Sample{6000 * kMs, "n", {}, 5});
  h.samples.push_back(Sample{7000 * kMs, "n", {}, 0});
  auto r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  std::string v = r.violations[0];
  EXPECT_NE(v.find("free on every node that answered in 1 of 5 samples; holds: [a owner"),
            std::string::npos)
      << v;
  EXPECT_NE(v.find("[a owner p1:7 hold h.9, in 2 on nodes 1,3, ttl 350..400 ms]"),
            std::string::npos)
      << v;
  EXPECT_NE(v.find("[no worker's reader owner p2:3 hold h.4, in 1 on nodes 2, ttl 120..120 ms]"),
            std::string::npos)
      << v;
  EXPECT_EQ(v.find("p3:1"), std::string::npos) << v;
  // Five holds are listed, and how many more there were.
  for (int k = 0; k < 6; ++k) {
    h.samples.push_back(Sample{
        (8000 + k) * kMs, "n", {SampledHold{0, false, "p9:" + std::to_string(k), "h.0", 10}}, 1});
  }
  r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  v = r.violations[0];
  EXPECT_NE(v.find(" and 3 more"), std::string::npos) << v;
}

TEST(HistoryCheckTest, WaiterPassedOverByManyHandOffsOutsideFaultsIsAViolation) {
  History h = clean();
  // A fault at the start of the wait excuses the timeout under the first rule.
  h.faults.push_back(Fault{"kill", "node-1", 0, 150 * kMs});
  h.events.push_back(cycle("w", 0, 100, 10100, "timeout"));
  std::uint64_t token = 4;
  for (std::int64_t at = 200; at < 200 + (kStarvedHandOffs - 1) * 40; at += 40) {
    h.events.push_back(cycle(token % 2 ? "a" : "b", token, at, at + 20));
    ++token;
  }
  h.counter = static_cast<std::int64_t>(token - 1);
  EXPECT_TRUE(check(h).violations.empty()) << "one hand-off short of the limit";
  h.events.push_back(cycle("a", token, 9000, 9020));
  h.counter += 1;
  const Report r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("others took it"), std::string::npos) << r.violations[0];
  // A hand-off while a fault runs does not count: then a default-mode waiter may lose any
  // number of races (docs/reliability.md).
  h.faults.push_back(Fault{"delay-replies", "node-2", 8990 * kMs, 9010 * kMs});
  EXPECT_TRUE(check(h).violations.empty());
  h.faults.pop_back();
  h.events[3].skewed = true;  // the polling worker: only the no-fault rule applies
  EXPECT_TRUE(check(h).violations.empty());
}

// One holder taking a name over and over while another waits through it all: its releases
// told nobody, so its hand-off grace never held it back (the string key's first release
// published nothing unflagged: a worker took a lock 436 times in a row, seed 20261128).
TEST(HistoryCheckTest, OneHolderTakingANameOverAndOverWhileAnotherWaitsIsAViolation) {
  History h = clean();  // its last grant, a's at 25 ms, opens the run
  std::uint64_t token = 4;
  for (long i = 0; i + 2 < kBargingRun; ++i, ++token) {
    h.events.push_back(cycle("a", token, 40 + 30 * i, 50 + 30 * i));
  }
  Event waiter = cycle("w", token, 40 + 30 * kBargingRun, 45 + 30 * kBargingRun);
  waiter.wait_ns = 22 * kMs;  // waiting before the run's first grant, served after its last
  h.events.push_back(waiter);
  h.counter = static_cast<std::int64_t>(token);
  EXPECT_TRUE(check(h).violations.empty()) << "one grant short of the limit";
  // One more grant of a's, in the run (w is served after it).
  h.events.insert(h.events.end() - 1,
                  cycle("a", token + 1, 30 * kBargingRun + 10, 30 * kBargingRun + 20));
  h.events.back().token = token + 2;
  h.counter = static_cast<std::int64_t>(token + 1);  // writes accepted
  const Report r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("times in a row"), std::string::npos) << r.violations[0];
  // Grants while a fault runs do not count (a slow node makes the race uneven).
  h.faults.push_back(Fault{"delay-replies", "node-2", 1000 * kMs, 1100 * kMs});
  EXPECT_TRUE(check(h).violations.empty());
  h.faults.pop_back();
  // Starvation is no fault here: the grants still count.
  h.faults.push_back(Fault{kStarved, starved_target(1), 0, 30 * kBargingRun * kMs});
  EXPECT_EQ(check(h).violations.size(), 1u);
  h.faults.pop_back();
  // Nor does a waiter that polls (the skewed worker) or one that was stopped.
  h.events.back().skewed = true;
  EXPECT_TRUE(check(h).violations.empty());
  h.events.back().skewed = false;
  h.events.back().paused = true;
  EXPECT_TRUE(check(h).violations.empty());
}

TEST(HistoryCheckTest, RoundTripsThroughAFile) {
  History h = clean();
  h.faults.push_back(Fault{"stop-node", "node-2", 1, 2});
  h.events[1].detail = "nest outer=300ms/renewed";
  h.events[1].owner = "p1:7";
  h.samples.push_back(Sample{5, "n", {SampledHold{2, true, "p1:7", "h.9", 42}}});
  const std::string path = testing::TempDir() + "/history.jsonl";
  {
    std::ofstream out(path);
    for (const auto& e : h.events) out << to_line(e) << "\n";
    for (const auto& f : h.faults) out << to_line(f) << "\n";
    for (const auto& s : h.samples) out << to_line(s) << "\n";
    out << summary_line(h) << "\n";
  }
  const History back = read_history(path);
  EXPECT_EQ(back.events.size(), 3u);
  EXPECT_EQ(back.events[1].owner, "p1:7");
  ASSERT_EQ(back.samples.size(), 1u);
  EXPECT_EQ(back.samples[0].at_ns, 5);
  ASSERT_EQ(back.samples[0].holds.size(), 1u);
  EXPECT_EQ(back.samples[0].holds[0].node, 2u);
  EXPECT_TRUE(back.samples[0].holds[0].shared);
  EXPECT_EQ(back.samples[0].holds[0].owner, "p1:7");
  EXPECT_EQ(back.samples[0].holds[0].hold, "h.9");
  EXPECT_EQ(back.samples[0].holds[0].ttl_ms, 42);
  EXPECT_EQ(back.faults.size(), 1u);
  EXPECT_EQ(back.counter, 3);
  EXPECT_EQ(back.events[1].holder, "b");
  EXPECT_EQ(back.events[1].detail, "nest outer=300ms/renewed");
  EXPECT_TRUE(back.counters.empty());
  std::remove(path.c_str());
}

// The async workers' names: many locks, each with a resource (a counter) of its own.
History with_async_names() {
  History h = clean();
  for (const std::string name : {"x", "y"}) {
    for (std::uint64_t k = 0; k < 3; ++k) {
      Event e =
          cycle(name + "-holder-" + std::to_string(k % 2), 10 + k,
                static_cast<std::int64_t>(100 + 50 * k), static_cast<std::int64_t>(130 + 50 * k));
      e.name = name;
      h.events.push_back(e);
    }
  }
  h.counters = {{"x", 3}, {"y", 3}};
  return h;
}

TEST(HistoryCheckTest, EachNameWithACounterOfItsOwnIsCheckedAgainstItsOwnWrites) {
  History h = with_async_names();
  EXPECT_TRUE(check(h).violations.empty());
  // Windows of different names may overlap: x and y above do, each with its own holders.
  h.counters["y"] = 2;  // a lost update on y alone
  auto r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("resource counter of 'y' is 2 but 3"), std::string::npos)
      << r.violations[0];
  // The writes of x and y do not count for `counter` (the names without one of their own).
  h = with_async_names();
  h.counter = 9;
  r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("resource counter is 9 but 3"), std::string::npos)
      << r.violations[0];
}

TEST(HistoryCheckTest, OverlapsAreFoundOnEveryName) {
  History h = with_async_names();
  h.events.back().acquire_ns = h.events[h.events.size() - 2].acquire_ns + 2 * kMs;  // y's 2nd
  const auto r = check(h);
  ASSERT_EQ(r.violations.size(), 1u);
  EXPECT_NE(r.violations[0].find("overlapping holders of 'y'"), std::string::npos)
      << r.violations[0];
}

TEST(HistoryCheckTest, CountersRoundTripThroughAFile) {
  const History h = with_async_names();
  const std::string path = testing::TempDir() + "/history-counters.jsonl";
  {
    std::ofstream out(path);
    out << summary_line(h) << "\n";
  }
  const History back = read_history(path);
  EXPECT_EQ(back.counter, 3);
  EXPECT_EQ(back.counters, h.counters);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dlock::chaos

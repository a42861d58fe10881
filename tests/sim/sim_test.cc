// SPDX-License-Identifier: MIT
// The simulation's test cases: many seeded schedules per node count and restart profile (see
// docs/simulation.md). Environment:
//   DLOCK_SIM_SCHEDULES  schedules per test case (default kDefaultSchedules: the CI count)
//   DLOCK_SIM_SEED       the first schedule's seed; schedule k uses seed + k (default 1)
//   DLOCK_SIM_THREADS    schedules run at once (default: one per core; a schedule's time is
//                        simulated, sim_clock.h, so it keeps the CPU busy and never waits)
//   DLOCK_SIM_STRICT=1   fail on the known findings too (two clients naming the same owner,
//                        keys re-armed by an extend after validity: docs/simulation.md)
//   DLOCK_SIM_VERBOSE=1  print every violating schedule's trace (default: the first of a kind)
//   DLOCK_SIM_DIGEST=1   print a line per schedule: what it chose (a digest of every random
//                        draw), the shape of its trace, its outcome and violations, and how long
//                        it took; two builds or runs compare with scripts/sim-digest-diff.py
//   DLOCK_SIM_DIGEST=2   the same, and every schedule's trace after its line (to read where
//                        two runs of a seed part)
//   DLOCK_SIM_BATCHING=0 no group commit on the nodes (ScheduleOptions::batching): the schedules
//                        of the simulation before it, draw for draw (a digest comparison with
//                        an older build checks that the batch model changed nothing else)
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "sim/sim_schedule.h"

namespace dlock::sim {
namespace {

// A schedule takes about 1 to 2.5 ms of CPU in the dev build (docs/simulation.md), so 80 take
// well under a second. (It was about 8 s per test case at 8 at once while schedules ran in real
// time.)
constexpr std::uint64_t kDefaultSchedules = 80;

std::uint64_t env(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

std::uint64_t threads() {
  return std::max<std::uint64_t>(
      1, env("DLOCK_SIM_THREADS", std::max(1u, std::thread::hardware_concurrency())));
}

struct Case {
  std::size_t nodes;
  Profile profile;
  bool permits = false;  // ScheduleOptions::permits
};

// What the schedules of one test case added up to.
struct Tally {
  std::mutex mu;
  std::map<std::string, std::size_t> counts;
  std::map<std::string, std::vector<std::uint64_t>> seeds;  // violation kind -> failing seeds
  std::set<std::string> known;                              // kinds that are known findings
  std::vector<std::string> printed;                         // kinds whose trace was printed
};

void add(Tally& t, std::uint64_t seed, const ScheduleReport& r, const std::string& replay,
         bool verbose) {
  std::lock_guard lock(t.mu);
  for (const auto& [k, n] : r.counts) t.counts[k] += n;
  std::set<std::string> kinds;
  for (const auto& v : r.violations) {
    kinds.insert(kind_name(v.kind));
    if (v.known()) t.known.insert(kind_name(v.kind));
  }
  for (const auto& k : kinds) {
    t.seeds[k].push_back(seed);
    const bool first = std::find(t.printed.begin(), t.printed.end(), k) == t.printed.end();
    if (!first && !verbose) continue;
    t.printed.push_back(k);
    std::cout << "\n=== violation (" << k << ") in seed " << seed
              << "\nreplay: DLOCK_SIM_SEED=" << seed
              << " DLOCK_SIM_SCHEDULES=1 DLOCK_SIM_THREADS=1 " << replay << "\n";
    for (const auto& v : r.violations)
      std::cout << "  " << kind_name(v.kind) << ": " << v.text << "\n";
    std::cout << "schedule:\n" << r.trace << std::flush;
  }
}

// How long a schedule took: on the wall clock, and on the CPU (its thread's time: on a busy
// machine the wall clock also counts the time other processes had the CPU).
struct Took {
  std::chrono::steady_clock::duration wall;
  std::chrono::nanoseconds cpu;
};

std::chrono::nanoseconds thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Runs schedules seed .. seed + count - 1, `threads` at once, handing each report to `done`
// with the time it took; stops early once `done` returns false.
void run_many(const ScheduleOptions& base, std::uint64_t seed, std::uint64_t count,
              std::uint64_t threads,
              const std::function<bool(std::uint64_t, const ScheduleReport&, Took)>& done) {
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (std::uint64_t t = 0; t < std::min(threads, count); ++t) {
    pool.emplace_back([&] {
      for (std::uint64_t k; !stop && (k = next.fetch_add(1)) < count;) {
        ScheduleOptions o = base;
        o.seed = seed + k;
        const auto started = std::chrono::steady_clock::now();
        const auto cpu = thread_cpu();
        const ScheduleReport r = run_schedule(o);
        const Took took{std::chrono::steady_clock::now() - started, thread_cpu() - cpu};
        if (!done(o.seed, r, took)) stop = true;
      }
    });
  }
  for (auto& t : pool) t.join();
}

// DLOCK_SIM_DIGEST's line for one schedule (one line, whole, so that threads do not mix them).
std::string digest_line(const std::string& test, std::uint64_t seed, const ScheduleReport& r,
                        Took took) {
  std::uint64_t outcome = 14695981039346656037ULL;  // FNV-1a of the counts and violations
  const auto add = [&](const std::string& s) {
    for (const char c : s) outcome = (outcome ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  };
  for (const auto& [k, n] : r.counts) add(k + "=" + std::to_string(n) + ";");
  std::string kinds;
  for (const auto& v : r.violations) (kinds += kinds.empty() ? "" : ",") += kind_name(v.kind);
  add(kinds);
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "digest %s seed %llu draws %llu decisions %016llx shape %016llx outcome %016llx "
      "violations %s ms %.3f cpu_ms %.3f trail ",
      test.c_str(), static_cast<unsigned long long>(seed), static_cast<unsigned long long>(r.draws),
      static_cast<unsigned long long>(r.decisions), static_cast<unsigned long long>(r.shape),
      static_cast<unsigned long long>(outcome), kinds.empty() ? "-" : kinds.c_str(),
      std::chrono::duration<double, std::milli>(took.wall).count(),
      std::chrono::duration<double, std::milli>(took.cpu).count());
  std::string line = buf;
  for (std::size_t i = 0; i < r.trail.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%08llx", i ? "," : "",
                  static_cast<unsigned long long>(r.trail[i] & 0xffffffffULL));
    line += buf;
  }
  return line + "\n";
}

class SimTest : public ::testing::TestWithParam<Case> {};

TEST_P(SimTest, Schedules) {
  const Case c = GetParam();
  const std::uint64_t schedules = env("DLOCK_SIM_SCHEDULES", kDefaultSchedules);
  const std::uint64_t seed = env("DLOCK_SIM_SEED", 1);
  const std::uint64_t at_once = threads();
  const bool strict = env("DLOCK_SIM_STRICT", 0) != 0;
  const bool verbose = env("DLOCK_SIM_VERBOSE", 0) != 0;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string replay = ::testing::internal::GetArgvs()[0] +
                             " --gtest_filter=" + info->test_suite_name() + "." + info->name();
  std::cout << "seeds " << seed << " to " << seed + schedules - 1 << ", " << c.nodes << " nodes, "
            << (c.profile == Profile::minority ? "minority" : "majority") << " restarts, "
            << at_once << " at once" << std::endl;

  const std::uint64_t digest = env("DLOCK_SIM_DIGEST", 0);
  const std::string test = std::string(info->test_suite_name()) + "." + info->name();

  Tally tally;
  std::mutex out;
  const bool batching = env("DLOCK_SIM_BATCHING", 1) != 0;
  run_many({seed, c.nodes, c.profile, Mutation::none, c.permits, digest != 0, batching}, seed,
           schedules, at_once, [&](std::uint64_t s, const ScheduleReport& r, auto took) {
             if (digest) {
               std::lock_guard lock(out);
               std::cout << digest_line(test, s, r, took) << (digest > 1 ? r.trace : "")
                         << std::flush;
             }
             add(tally, s, r, replay, verbose);
             return true;
           });

  for (const auto& [k, n] : tally.counts) std::cout << "  " << k << ": " << n << "\n";
  for (const auto& [kind, seeds] : tally.seeds) {
    std::cout << "  schedules with " << kind << " violations: " << seeds.size() << " (seeds";
    for (std::size_t i = 0; i < seeds.size() && i < 20; ++i) std::cout << " " << seeds[i];
    std::cout << (seeds.size() > 20 ? " ...)" : ")") << "\n";
  }
  std::cout << std::flush;
  // The record window is modelled (sim_fanout.h): a sweep whose acquisitions never skipped the
  // record would not have met acquire.lua's 'nr'/'r' path at all (a few hundred per 80
  // schedules of one node).
  if (schedules >= 20) {
    EXPECT_GT(tally.counts["acquisitions that skipped the record (window)"], 0U);
  }
  if (c.profile == Profile::majority) return;  // expected to be unsafe: counted, not failed
  for (const auto& [kind, seeds] : tally.seeds) {
    if (tally.known.count(kind) && !strict) continue;
    ADD_FAILURE() << seeds.size() << " of " << schedules << " schedules broke an invariant ("
                  << kind << "), first seed " << seeds.front() << " (schedule printed above)";
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return "N" + std::to_string(info.param.nodes);
}

// The library's promise: safe while at most a minority of nodes restart within a max ttl.
INSTANTIATE_TEST_SUITE_P(MinorityRestarts, SimTest,
                         ::testing::Values(Case{1, Profile::minority}, Case{3, Profile::minority},
                                           Case{5, Profile::minority}),
                         case_name);
// The same promise with semaphore permits among the locks, and clients that now and then name
// another permit count (issue 28).
INSTANTIATE_TEST_SUITE_P(MinorityRestartsWithPermits, SimTest,
                         ::testing::Values(Case{3, Profile::minority, true},
                                           Case{5, Profile::minority, true}),
                         case_name);
// Outside it: a majority restarting empty at once. Violations are counted, not failed.
INSTANTIATE_TEST_SUITE_P(MajorityRestartsUnsafe, SimTest,
                         ::testing::Values(Case{1, Profile::majority}, Case{3, Profile::majority},
                                           Case{5, Profile::majority}),
                         case_name);

// The checker must catch each planted bug: else a clean run would prove nothing. (The
// promotion and eviction mutations need a rarer coincidence than 600 random schedules
// reliably meet: SimDirected.AFailoverToALaggingReplicaIsARestart and
// ...ANodeThatMayEvictNeverVotes plant them in a schedule that shows them.)
struct Planted {
  Mutation mutation;
  Violation::Kind expected;
  const char* name;
  // Where the search starts. Any range of seeds shows the checker at work; while a schedule ran
  // in real time (about 0.7 s, mostly waiting), a search of hundreds was the longest test of
  // every preset (ForgetBoots: 60-110 s, the critical path of the suite, issue 29). Kept, so
  // that the search meets the same schedules as before.
  std::uint64_t first_seed = 1;
  bool permits = false;  // the workload takes semaphore permits too
  // Nodes per schedule: 1 for the group commit's acquisitions (the lock layer offers the batch
  // form only with the node's counter, on a lock set of one node).
  std::size_t nodes = 3;
};

std::string planted_name(const ::testing::TestParamInfo<Planted>& p) {
  return p.param.name;
}

class SimSelfTest : public ::testing::TestWithParam<Planted> {};

TEST_P(SimSelfTest, CatchesAPlantedBug) {
  const Planted p = GetParam();
  std::atomic<std::uint64_t> caught{0};
  std::atomic<std::uint64_t> first{0};
  // Up to 2,000 schedules, stopping at the first catch: the rarest planted bug (ForgetBoots)
  // was caught in about 1.5% of schedules (15 of 1,000 measured), so 200 missed it one run in
  // 20. Since a refused attempt takes its announcement back (issue 28), the client greets again
  // after refusals and the planted bug's window is rarer: 600 missed it in 3 of 5 runs (first
  // catch at seed 662 in one). The assertion is the same; only the search is longer. Its
  // search starts at seed 600: from seed 1 the first catch came at 616 or 662 in the runs
  // measured (a schedule's timing varied a little from run to run then), after 60-110 s.
  run_many({0, p.nodes, Profile::minority, p.mutation, p.permits}, p.first_seed, 2000, threads(),
           [&](std::uint64_t seed, const ScheduleReport& r, auto) {
             for (const auto& v : r.violations) {
               if (v.kind != p.expected) continue;
               if (caught++ == 0) first = seed;
               return false;
             }
             return true;
           });
  EXPECT_GT(caught.load(), 0u) << "no " << kind_name(p.expected) << " violation found";
  if (caught) std::cout << "caught in seed " << first << std::endl;
}

INSTANTIATE_TEST_SUITE_P(
    Planted, SimSelfTest,
    ::testing::Values(
        Planted{Mutation::grant_when_held, Violation::Kind::overlap, "GrantWhenHeld"},
        Planted{Mutation::no_fence_increment, Violation::Kind::fence, "NoFenceIncrement"},
        Planted{Mutation::triple_ttl, Violation::Kind::hold_key, "TripleTtl"},
        Planted{Mutation::forget_boots, Violation::Kind::overlap, "ForgetBoots", 600},
        Planted{Mutation::ignore_permit_count, Violation::Kind::permits, "IgnorePermitCount", 1,
                true},
        // The batch model (acquire_batch.lua) broken: each only in batch calls.
        Planted{Mutation::batch_grants_when_held, Violation::Kind::overlap, "BatchGrantsWhenHeld",
                1, false, 1},
        Planted{Mutation::batch_reuses_floor, Violation::Kind::fence, "BatchReusesFloor", 1, false,
                1},
        // Only the node's order shows it (checker (7)): the names of one batch
        // call are in flight together, and the floor stays above the token.
        Planted{Mutation::batch_shares_one_token,
                Violation::Kind::grant_not_above_earlier_grant_on_one_node, "BatchSharesOneToken",
                1, false, 1},
        // The native acquisition's SET written over another's hold: only in the
        // acquisitions a record window covers.
        Planted{Mutation::native_set_without_nx, Violation::Kind::overlap, "NativeSetWithoutNx"}),
    planted_name);

}  // namespace
}  // namespace dlock::sim

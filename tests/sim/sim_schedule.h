// SPDX-License-Identifier: MIT
// One seeded schedule: three clients, each the real lock::QuorumLock and lock::Holds over its
// own SimFanout, on 1, 3 or 5 simulated nodes, taking, nesting, extending, ending and
// abandoning leases on one or two names while the cluster injects faults and restarts. Every
// choice comes from the seed; time is simulated (sim_clock.h), with ttls of 30-200 ms and short
// sleeps that take no real time, so a schedule takes a few milliseconds and replays exactly.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "lock/holds.h"
#include "lock/quorum_lock.h"
#include "sim/sim_checker.h"
#include "sim/sim_cluster.h"
#include "sim/sim_fanout.h"

namespace dlock::sim {

struct ScheduleOptions {
  std::uint64_t seed = 1;
  std::size_t nodes = 3;
  Profile profile = Profile::minority;
  Mutation mutation = Mutation::none;  // only for the self-test
  // Some acquisitions take a permit of a semaphore instead (a slot name with its permit
  // count), now and then with a wrong count, as a misconfigured service would. Off by
  // default: the rng draws it takes would change every other schedule of a seed.
  bool permits = false;
  // Fill ScheduleReport::shape and ::trail (DLOCK_SIM_DIGEST).
  bool digest = false;
  // Group commit on the nodes (ClusterOptions::batching): acquisitions on one node and
  // releases by hold id go through the batch scripts, alone or with late calls.
  bool batching = true;
};

struct ScheduleReport {
  std::vector<Violation> violations;
  std::string trace;  // the whole schedule, kept when there are violations (or with digest)
  std::map<std::string, std::size_t> counts;  // operations and outcomes, faults, restarts
  // What the schedule chose: Rng::digest() and Rng::draws() at its end.
  std::uint64_t decisions = 0;
  std::uint64_t draws = 0;
  // With ScheduleOptions::digest: shape_digest() of the trace, its steps, calls, faults and
  // replies without the numbers and random ids that differ from run to run.
  std::uint64_t shape = 0;
  // With ScheduleOptions::digest: per part of the schedule (its start, each step, the finish),
  // the draws until its end and its shape, so that two runs can be compared step by step: a
  // schedule that stopped earlier (kScheduleBudget) shares its steps with a longer one.
  std::vector<std::uint64_t> trail;
};

ScheduleReport run_schedule(const ScheduleOptions& options);

// The largest ttl the workload uses: the bound of invariants (3) and (4), and the restart window.
inline constexpr std::chrono::milliseconds kMaxTtl{200};

// The schedule's state and its operations (sim_ops.cc).
class Schedule {
 public:
  explicit Schedule(const ScheduleOptions& options);
  ScheduleReport run();

 private:
  struct Client {
    std::unique_ptr<SimFanout> fanout;
    std::unique_ptr<lock::QuorumLock> lock;
    std::unique_ptr<lock::Holds> holds;
  };

  void step(std::size_t index);
  void finish();
  bool stopped() const;

  // The operations, as src/api/client.cc and src/api/lease.cc drive Holds and QuorumLock.
  void acquire(std::size_t c, const std::string& name, const OwnerToken& owner,
               std::chrono::milliseconds ttl, std::size_t permits = 0);
  void acquire_new();
  void acquire_permit();
  void acquire_nested();
  void extend();
  void end();
  void end(LeaseRecord& lease);
  void idle();
  void restart();

  std::chrono::milliseconds pick_ttl();
  // A lease not ended yet, chosen at random; nullptr if none. `live`: held right now.
  LeaseRecord* pick_lease(bool live);
  std::string label(std::size_t c) const { return "client " + std::to_string(c); }

  ScheduleOptions options_;
  Clock::time_point start_;
  Rng rng_;
  Trace trace_;
  std::unique_ptr<SimCluster> cluster_;
  std::vector<Client> clients_;
  std::vector<std::string> names_;
  bool shared_owner_ = false;  // clients sometimes name the same explicit owner
  Checker checker_{kMaxTtl};
  std::vector<LeaseRecord> leases_;
  std::map<std::string, std::size_t> counts_;
  std::set<std::string> holds_seen_;     // hold ids of acquired leases: a new one is a new hold
  std::vector<std::uint64_t> draws_at_;  // with options_.digest: rng_.digest() as each part ends
};

}  // namespace dlock::sim

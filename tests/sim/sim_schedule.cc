// SPDX-License-Identifier: MIT
#include "sim/sim_schedule.h"

#include "lock/validity.h"
#include "sim/sim_clock.h"

namespace dlock::sim {

using namespace std::chrono_literals;

namespace {

constexpr double kDriftFactor = 0.01;  // the library's default
// A schedule stops taking steps after this long (in simulated time, sim_clock.h): it used to keep
// a schedule under a second of real time, and it still bounds what a schedule explores.
constexpr auto kScheduleBudget = 850ms;

const char* profile_name(Profile p) {
  return p == Profile::minority ? "minority" : "majority";
}

}  // namespace

ScheduleReport run_schedule(const ScheduleOptions& options) {
  // Simulated time, from before the schedule's first reading of the clock to after its last.
  SimClock clock;
  Schedule schedule(options);
  return schedule.run();
}

Schedule::Schedule(const ScheduleOptions& options)
    : options_(options), start_(Clock::now()), rng_(options.seed), trace_(start_) {
  ClusterOptions co;
  co.nodes = options.nodes;
  co.profile = options.profile;
  co.mutation = options.mutation;
  co.failovers = true;
  co.evictions = true;
  co.batching = options.batching;
  static constexpr double kFaultRates[] = {0.0, 0.05, 0.15, 0.3};
  co.fault_rate = kFaultRates[rng_.below(4)];
  co.restart_share = 0.1;
  co.restart_window = kMaxTtl + lock::drift(kMaxTtl, kDriftFactor);
  names_ = rng_.chance(0.5) ? std::vector<std::string>{"sim-a"}
                            : std::vector<std::string>{"sim-a", "sim-b"};
  shared_owner_ = rng_.chance(0.5);
  trace_.line("seed " + std::to_string(options.seed) + ", " + std::to_string(options.nodes) +
              " nodes, profile " + profile_name(options.profile) + ", fault rate " +
              std::to_string(co.fault_rate) + ", " + std::to_string(names_.size()) +
              " names, shared owner " + (shared_owner_ ? "yes" : "no"));
  cluster_ = std::make_unique<SimCluster>(co, rng_, trace_, start_);
  for (std::size_t c = 0; c < 3; ++c) {
    Client client;
    client.fanout = std::make_unique<SimFanout>(*cluster_, c);
    client.lock = std::make_unique<lock::QuorumLock>(*client.fanout, kDriftFactor);
    client.holds = std::make_unique<lock::Holds>(*client.lock);
    clients_.push_back(std::move(client));
  }
}

bool Schedule::stopped() const {
  for (const auto& v : checker_.violations()) {
    if (!v.known()) return true;
  }
  return false;
}

ScheduleReport Schedule::run() {
  const auto steps = static_cast<std::size_t>(rng_.between(40, 60));
  std::size_t k = 0;
  for (; k < steps && Clock::now() - start_ < kScheduleBudget && !stopped(); ++k) step(k);
  if (!stopped()) {
    if (options_.digest) draws_at_.push_back(rng_.digest());
    trace_.step(k, "finish: every lease ends, then the late calls run");
    cluster_->set_step(k);
    finish();
  }
  ScheduleReport report;
  report.violations = checker_.violations();
  if (!report.violations.empty()) report.trace = trace_.str();
  report.counts = counts_;
  for (const auto& [fault, n] : cluster_->stats().faults) report.counts["fault " + fault] += n;
  report.counts["restarts"] += cluster_->stats().restarts;
  report.counts["failovers"] += cluster_->stats().failovers;
  report.counts["late runs"] += cluster_->stats().late_runs;
  report.counts["acquisitions sent with the record window"] += cluster_->stats().record_known_sent;
  report.counts["acquisitions that skipped the record (window)"] += cluster_->records_skipped();
  report.counts["native acquisitions"] += cluster_->stats().native_sent;
  report.counts["native acquisitions granted by their commands"] +=
      cluster_->stats().native_granted;
  report.counts["native acquisitions answered by acquire.lua"] +=
      cluster_->stats().native_to_script;
  report.counts["late calls run between a native form's commands"] +=
      cluster_->stats().native_interleaved;
  report.counts["native acquisitions whose acquire.lua was told the SET wrote"] +=
      cluster_->stats().native_after_write;
  report.counts["native acquisitions broken after the SET"] += cluster_->stats().native_set_only;
  report.counts["native acquisitions unanswered"] += cluster_->stats().native_unanswered;
  if (options_.batching) {  // without, the counts (and digests) of the schedules before it
    report.counts["batch calls"] += cluster_->stats().batch_calls;
    report.counts["batch items"] += cluster_->stats().batch_items;
    report.counts["batch items run late"] += cluster_->stats().batch_late_items;
    report.counts["batch items left alone, then run alone"] += cluster_->stats().batch_left_alone;
  }
  report.counts["steps"] += k;
  report.decisions = rng_.digest();
  report.draws = rng_.draws();
  if (options_.digest) {
    const std::string trace = trace_.str();
    report.trace = trace;
    report.shape = shape_digest(trace);
    draws_at_.push_back(rng_.digest());
    report.trail = shape_digests(trace);
    for (std::size_t i = 0; i < report.trail.size() && i < draws_at_.size(); ++i) {
      report.trail[i] ^= draws_at_[i];
    }
  }
  return report;
}

void Schedule::step(std::size_t index) {
  if (options_.digest) draws_at_.push_back(rng_.digest());
  sleep_for(std::chrono::milliseconds(rng_.between(0, 6)));
  const auto pick = rng_.below(100);
  const char* op = pick < 30   ? "acquire"
                   : pick < 42 ? "nested acquire"
                   : pick < 60 ? "extend"
                   : pick < 80 ? "end"
                   : pick < 92 ? "idle"
                               : "restart";
  trace_.step(index, op);
  cluster_->set_step(index);
  cluster_->run_due(index);
  cluster_->tick();
  if (pick < 30) {
    if (options_.permits && rng_.chance(0.5)) {
      acquire_permit();
    } else {
      acquire_new();
    }
  } else if (pick < 42) {
    acquire_nested();
  } else if (pick < 60) {
    extend();
  } else if (pick < 80) {
    end();
  } else if (pick < 92) {
    idle();
  } else {
    restart();
  }
  checker_.check(leases_, *cluster_);
}

void Schedule::finish() {
  for (auto& lease : leases_) end(lease);
  cluster_->flush();
  checker_.check(leases_, *cluster_);
  for (std::size_t c = 0; c < clients_.size(); ++c) {
    if (const auto n = clients_[c].holds->entries(); n != 0) {
      checker_.report({Violation::Kind::bookkeeping, label(c) + " keeps " + std::to_string(n) +
                                                         " Holds entries after every lease ended"});
    }
  }
}

}  // namespace dlock::sim

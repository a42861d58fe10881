// SPDX-License-Identifier: MIT
#include "sim/sim_checker.h"

#include <algorithm>

#include "lock/keys.h"

namespace dlock::sim {
namespace {

using Status = detail::LeaseState::Status;

std::string describe(const LeaseRecord& l) {
  std::lock_guard lock(l.state->mu);
  return "lease #" + std::to_string(l.id) + " (client " + std::to_string(l.client) + ", owner " +
         l.owner.str() + ", hold " + l.state->hold->id.id + ", token " +
         std::to_string(l.state->hold->fence.value()) + ")";
}

// The name of a fencing counter: NAME of dlock:fence:{NAME}, or of dlock:fence:{TAG}:NAME for a
// name with braces (lock/keys.h auxiliary_key), or empty.
std::string fenced_name(const std::string& key) {
  const std::string prefix = "dlock:fence:{";
  if (key.rfind(prefix, 0) != 0) return {};
  if (key.back() == '}') return key.substr(prefix.size(), key.size() - prefix.size() - 1);
  const auto tag_end = key.find("}:", prefix.size());
  return tag_end == std::string::npos ? std::string() : key.substr(tag_end + 2);
}

}  // namespace

const char* kind_name(Violation::Kind k) {
  switch (k) {
    case Violation::Kind::overlap:
      return "overlap";
    case Violation::Kind::shared_owner:
      return "shared-owner-overlap";
    case Violation::Kind::fence:
      return "fence";
    case Violation::Kind::token_not_above_earlier_holder_on_one_node:
      return "token-not-above-earlier-holder-on-one-node";
    case Violation::Kind::grant_not_above_earlier_grant_on_one_node:
      return "grant-not-above-earlier-grant-on-one-node";
    case Violation::Kind::hold_key:
      return "hold-key";
    case Violation::Kind::name_key:
      return "name-key";
    case Violation::Kind::renew_after_expiry:
      return "renew-after-expiry";
    case Violation::Kind::fence_beyond_minority_failures:
      return "fence-beyond-minority-failures";
    case Violation::Kind::permits:
      return "permits";
    case Violation::Kind::bookkeeping:
      return "bookkeeping";
  }
  return "?";
}

bool held_at(const detail::LeaseState& s, Clock::time_point now) {
  std::lock_guard lock(s.mu);
  return s.status == Status::held && !s.hold->lost.load() && now < s.valid_until;
}

void Checker::attempting(std::size_t client, const std::string& name, const OwnerToken& owner,
                         const std::vector<LeaseRecord>& all) {
  const auto now = Clock::now();
  for (const auto& l : all) {
    if (l.client != client && l.name == name && l.owner == owner && held_at(*l.state, now)) {
      usurped_.insert(l.id);
    }
  }
}

void Checker::attempted(const std::string& name,
                        const std::vector<std::pair<std::string, std::string>>& touched,
                        Clock::time_point end) {
  name_ref_[name] = std::max(name_ref_[name], end);
  if (const auto record = lock::permit_record_key(name); !record.empty()) {
    name_ref_[record] = std::max(name_ref_[record], end);
  }
  for (const auto& [touched_name, hold] : touched) {
    hold_ref_[hold] = std::max(hold_ref_[hold], end);
    name_ref_[touched_name] = std::max(name_ref_[touched_name], end);
  }
}

void Checker::renewed_after_expiry(const std::string& name, const std::string& hold_id,
                                   Clock::time_point end) {
  late_hold_ref_[hold_id] = std::max(late_hold_ref_[hold_id], end);
  late_name_ref_[name] = std::max(late_name_ref_[name], end);
  if (const auto record = lock::permit_record_key(name); !record.empty()) {
    late_name_ref_[record] = std::max(late_name_ref_[record], end);
  }
}

void Checker::permit_counts(const LeaseRecord& lease, const std::vector<LeaseRecord>& all) {
  const auto semaphore = lock::semaphore_of_slot(lease.name);
  if (lease.permits == 0 || semaphore.empty()) return;
  const auto now = Clock::now();
  std::set<const void*> holds;  // reentrant leases share a hold: one permit
  std::size_t smallest = lease.permits;
  bool mixed = false;
  std::string who;
  for (const auto& l : all) {
    if (l.permits == 0 || lock::semaphore_of_slot(l.name) != semaphore || !held_at(*l.state, now)) {
      continue;
    }
    holds.insert(l.state->hold.get());
    smallest = std::min(smallest, l.permits);
    mixed = mixed || l.permits != lease.permits;
    who += " " + describe(l) + " (count " + std::to_string(l.permits) + ")";
  }
  if (holds.size() <= smallest && !mixed) return;
  violations_.push_back({Violation::Kind::permits,
                         std::to_string(holds.size()) + " live permits of '" +
                             std::string(semaphore) + "' when lease #" + std::to_string(lease.id) +
                             " was acquired, counts in use differ or the smallest is " +
                             std::to_string(smallest) + ":" + who});
}

void Checker::overlaps(const std::vector<const LeaseRecord*>& held, const std::string& when) {
  for (std::size_t a = 0; a < held.size(); ++a) {
    for (std::size_t b = a + 1; b < held.size(); ++b) {
      const LeaseRecord& x = *held[a];
      const LeaseRecord& y = *held[b];
      const bool same_client = x.client == y.client;
      const bool same_owner = x.owner == y.owner;
      if (same_client && same_owner && x.state->hold == y.state->hold) continue;  // reentrant
      if (!reported_.insert({std::min(x.id, y.id), std::max(x.id, y.id)}).second) continue;
      Violation::Kind kind = Violation::Kind::overlap;
      std::string what = "two owners hold '" + x.name + "'";
      if (same_client && same_owner) {
        kind = Violation::Kind::bookkeeping;
        what = "one client holds '" + x.name + "' under two holds of one owner";
      } else if (same_owner) {
        kind = Violation::Kind::shared_owner;
        what = "two clients naming the same owner hold '" + x.name + "'";
        // The older lease's hold was taken over: its client believes in a hold that is gone.
        usurped_.insert(std::min(x.id, y.id));
      } else if (usurped_.count(x.id) || usurped_.count(y.id)) {
        kind = Violation::Kind::shared_owner;
        what = "two owners hold '" + x.name + "', one of them by a hold that another client " +
               "naming the same owner took over";
      }
      violations_.push_back({kind, what + " " + when + ": " + describe(x) + " and " + describe(y)});
    }
  }
}

void Checker::acquired(const LeaseRecord& lease, const std::vector<LeaseRecord>& all,
                       const SimCluster& cluster) {
  const auto now = Clock::now();
  std::vector<const LeaseRecord*> held{&lease};
  for (const auto& l : all) {
    if (l.id != lease.id && l.name == lease.name && held_at(*l.state, now)) held.push_back(&l);
  }
  overlaps(held, "when lease #" + std::to_string(lease.id) + " was acquired");
  permit_counts(lease, all);
  if (lease.reentrant) return;
  one_node_order(lease, all, cluster);
  const std::uint64_t token = lease.state->hold->fence.value();
  auto& last = last_token_[lease.name];
  if (token <= last) {
    const auto previous = last_hold_.find(lease.name);
    const std::size_t failed =
        cluster.failed_since(previous == last_hold_.end() ? lease.acquired_at : previous->second);
    const bool majority = failed >= cluster.size() / 2 + 1;
    violations_.push_back(
        {majority ? Violation::Kind::fence_beyond_minority_failures : Violation::Kind::fence,
         "fencing token of a new hold of '" + lease.name +
             "' did not grow: " + std::to_string(last) + " then " + std::to_string(token) +
             " for " + describe(lease) + "; " + std::to_string(failed) +
             " nodes restarted since the previous new hold or gave this acquisition no answer"});
  }
  last_hold_[lease.name] = lease.acquired_at;
  // Judged against the previous new hold only: after a drop that is tallied and passed over
  // (failures beyond a minority), the sequence starts again from the new token.
  last = token;
}

void Checker::one_node_order(const LeaseRecord& lease, const std::vector<LeaseRecord>& all,
                             const SimCluster& cluster) {
  if (cluster.size() != 1) return;
  const auto token = lease.state->hold->fence.value();
  // The earlier new hold with the largest token not below this one's, among those with no
  // restart since they ended (a violation), and among the others (tallied apart).
  const LeaseRecord* worst[2] = {nullptr, nullptr};
  for (const auto& l : all) {
    if (l.id == lease.id || l.reentrant || l.acquired_at > lease.started_at) continue;
    const auto earlier = l.state->hold->fence.value();
    const bool restarted = cluster.restarted_since(l.acquired_at) > 0;
    const LeaseRecord*& w = worst[restarted ? 1 : 0];
    if (earlier >= token && (!w || earlier > w->state->hold->fence.value())) w = &l;
  }
  for (const bool restarted : {false, true}) {
    const LeaseRecord* w = worst[restarted ? 1 : 0];
    if (!w) continue;
    violations_.push_back(
        {restarted ? Violation::Kind::fence_beyond_minority_failures
                   : Violation::Kind::token_not_above_earlier_holder_on_one_node,
         "on one node, a new hold of '" + lease.name + "' whose acquisition began @" +
             cluster.trace().at(lease.started_at) + "ms got a token not above that of " +
             describe(*w) + ", acquired @" + cluster.trace().at(w->acquired_at) +
             "ms: " + describe(lease) + (restarted ? "; the node restarted in between" : "")});
    return;  // one finding per hold: the one that is not excused first
  }
}

void Checker::one_node_grants(SimCluster& cluster) {
  if (cluster.size() != 1) return;
  for (const SimNode::Grant& g : cluster.node(0).take_grants()) {
    if (last_grant_ && g.token <= last_grant_->token) {
      const bool restarted = g.generation != last_grant_->generation;
      violations_.push_back({restarted ? Violation::Kind::fence_beyond_minority_failures
                                       : Violation::Kind::grant_not_above_earlier_grant_on_one_node,
                             "on one node, a grant got token " + std::to_string(g.token) +
                                 ", not above the node's previous grant, " +
                                 std::to_string(last_grant_->token) +
                                 (restarted ? " (the node restarted in between)" : "")});
    }
    // Judged against the previous grant only, as (2) is.
    last_grant_ = g;
  }
}

void Checker::check(const std::vector<LeaseRecord>& all, SimCluster& cluster) {
  one_node_grants(cluster);
  const auto now = Clock::now();
  std::map<std::string, std::vector<const LeaseRecord*>> held;
  for (const auto& l : all) {
    if (held_at(*l.state, now)) held[l.name].push_back(&l);
  }
  for (const auto& [name, leases] : held) overlaps(leases, "after the step");
  for (std::size_t i = 0; i < cluster.size(); ++i) check_node(i, cluster, all);
}

Clock::time_point Checker::validity_of(const std::vector<LeaseRecord>& all, const std::string& name,
                                       const std::string& hold_id) const {
  auto latest = Clock::time_point::min();
  for (const auto& l : all) {
    if (l.name != name && lock::permit_record_key(l.name) != name) continue;
    std::lock_guard lock(l.state->mu);
    if (hold_id.empty() || l.state->hold->id.id == hold_id) {
      latest = std::max(latest, l.state->valid_until);
    }
  }
  return latest;
}

Clock::duration Checker::allowance(const SimCluster& cluster, const std::string& name) const {
  // The slowest node clock (rate 0.995) stretches a ttl by 0.5%; 1 ms for the expiry
  // granularity, 5 ms for the time between a call's execution and the end of its operation.
  const auto stretched = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(static_cast<double>(max_ttl_.count()) / 0.995));
  return stretched + std::chrono::milliseconds(6) + cluster.late_delay(name);
}

void Checker::expired_late(Violation::Kind kind, const std::string& what, Clock::time_point expires,
                           Clock::time_point ref, Clock::duration allowance,
                           std::optional<Clock::time_point> late_ref, const SimCluster& cluster) {
  if (expires <= ref + allowance) return;
  if (!reported_keys_.insert(what).second) return;
  const std::string text = what + " until @" + cluster.trace().at(expires) +
                           "ms, past the bound @" + cluster.trace().at(ref + allowance) + "ms";
  if (late_ref && expires <= std::max(ref, *late_ref) + allowance) {
    violations_.push_back({Violation::Kind::renew_after_expiry,
                           text + " (re-armed by an extend that began after the validity ended @" +
                               cluster.trace().at(*late_ref) + "ms)"});
    return;
  }
  violations_.push_back({kind, text});
}

void Checker::check_node(std::size_t i, SimCluster& cluster, const std::vector<LeaseRecord>& all) {
  SimNode& node = cluster.node(i);
  const std::string where = "node " + std::to_string(i);
  for (const auto& [key, entry] : node.live_keys()) {
    if (key == lock::kFenceFloorKey || key == lock::kBootsKey || key == lock::kMaxTtlKey) continue;
    const std::string fenced = fenced_name(key);
    const std::string name = fenced.empty() ? key : fenced;
    const auto ref = name_ref_.find(name);
    if (ref == name_ref_.end()) {
      violations_.push_back(
          {Violation::Kind::name_key, where + " keeps " + key + ", a key of no name ever locked"});
      continue;
    }
    if (!entry.expire_at) {
      violations_.push_back(
          {Violation::Kind::name_key, where + " keeps " + key + " without a ttl"});
      continue;
    }
    const auto expires = node.clock().real_time(*entry.expire_at + 1);
    const auto name_bound = std::max(ref->second, validity_of(all, name, ""));
    const auto late_name = late_name_ref_.find(name);
    expired_late(
        Violation::Kind::name_key, where + " keeps " + key, expires, name_bound,
        allowance(cluster, name),
        late_name == late_name_ref_.end() ? std::nullopt : std::optional(late_name->second),
        cluster);
    const Hash* hash = std::get_if<Hash>(&entry.value);
    if (!fenced.empty() || !hash || key.rfind("dlock:permits:", 0) == 0) continue;
    for (const auto& [owner, hold] : *hash) {
      const auto h = hold_ref_.find(hold);
      if (h == hold_ref_.end()) {
        violations_.push_back({Violation::Kind::hold_key, where + " keeps hold " + hold + " of " +
                                                              owner + " on " + key +
                                                              ", a hold no acquisition named"});
        continue;
      }
      const auto bound = std::max(h->second, validity_of(all, name, hold));
      const auto late = late_hold_ref_.find(hold);
      expired_late(Violation::Kind::hold_key, where + " keeps hold " + hold + " on " + key, expires,
                   bound, allowance(cluster, name),
                   late == late_hold_ref_.end() ? std::nullopt : std::optional(late->second),
                   cluster);
    }
  }
}

}  // namespace dlock::sim

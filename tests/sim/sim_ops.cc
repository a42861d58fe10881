// SPDX-License-Identifier: MIT
// The workload's operations, driving Holds and QuorumLock the way the public API does:
// acquire as src/api/client.cc's attempt(), extend and end as src/api/lease.cc's
// Lease::extend() and Lease::unlock() (the watchdog is not used: renewals are explicit extends).
#include "lock/keys.h"
#include "sim/sim_clock.h"
#include "sim/sim_schedule.h"

namespace dlock::sim {

using namespace std::chrono_literals;
using Status = detail::LeaseState::Status;

namespace {

std::string ms(Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count() / 1000.0)
             .substr(0, 6) +
         "ms";
}

}  // namespace

std::chrono::milliseconds Schedule::pick_ttl() {
  static constexpr std::chrono::milliseconds kTtls[] = {30ms, 50ms, 80ms, 120ms, kMaxTtl};
  return kTtls[rng_.below(std::size(kTtls))];
}

LeaseRecord* Schedule::pick_lease(bool live) {
  const auto now = Clock::now();
  std::vector<LeaseRecord*> candidates;
  for (auto& l : leases_) {
    bool open = false;
    {
      std::lock_guard lock(l.state->mu);
      open = l.state->status != Status::released;
    }
    if (open && (!live || held_at(*l.state, now))) candidates.push_back(&l);
  }
  if (candidates.empty()) return nullptr;
  return candidates[rng_.below(candidates.size())];
}

void Schedule::acquire(std::size_t c, const std::string& name, const OwnerToken& owner,
                       std::chrono::milliseconds ttl, std::size_t permits) {
  trace_.line(label(c) + " acquires '" + name + "' as " + owner.str() + ", ttl " +
              std::to_string(ttl.count()) + "ms" +
              (permits > 0 ? ", one of " + std::to_string(permits) + " permits" : ""));
  // As attempt() fills it; an explicit owner, so no thread liveness.
  auto state = std::make_shared<detail::LeaseState>();
  state->ttl = ttl;
  state->auto_renew = false;
  state->renew_every = std::max(std::chrono::milliseconds(1), ttl / 3);
  (void)cluster_->take_touched();
  checker_.attempting(c, name, owner, leases_);
  const auto start = Clock::now();  // before the client's first call
  auto refused = clients_[c].holds->acquire(state, name, owner, ttl, std::nullopt,
                                            lock::HoldKind::write, {}, {}, permits);
  const auto end = Clock::now();
  checker_.attempted(name, cluster_->take_touched(), end);
  if (refused) {
    ++counts_["acquire refused: " + refused->error.code().message()];
    trace_.line("=> refused: " + refused->error.message());
    return;
  }
  state->renewed_at = end;
  const bool reentrant = !holds_seen_.insert(state->hold->id.id).second;
  ++counts_[reentrant ? "acquire reentrant" : "acquire new hold"];
  leases_.push_back(
      LeaseRecord{leases_.size(), c, name, owner, reentrant, permits, end, state, start});
  trace_.line("=> lease #" + std::to_string(leases_.back().id) + " held" +
              (reentrant ? " (reentrant)" : "") + ", hold " + state->hold->id.id + ", token " +
              std::to_string(state->hold->fence.value()) + ", valid for " +
              ms(state->valid_until - end));
  checker_.acquired(leases_.back(), leases_, *cluster_);
}

void Schedule::acquire_new() {
  const std::size_t c = rng_.below(clients_.size());
  const std::string& name = names_[rng_.below(names_.size())];
  std::string owner = "c" + std::to_string(c) + (rng_.chance(0.5) ? "-a" : "-b");
  if (shared_owner_ && rng_.chance(0.3)) owner = "shared";
  acquire(c, name, OwnerToken(owner), pick_ttl());
}

// Semaphore's attempt on one slot (src/recipes/semaphore.cc slot_attempt), with the client's permit
// count: 2, or now and then 3 (a service configured with another count; the nodes refuse it
// while a count is recorded). Each permit under an owner of its own, as there: never a
// reentrant lease of a slot.
void Schedule::acquire_permit() {
  const std::size_t c = rng_.below(clients_.size());
  const std::size_t permits = rng_.chance(0.25) ? 3 : 2;
  const std::string name = lock::semaphore_slot("sim-sem", rng_.below(permits));
  const std::string owner = "c" + std::to_string(c) + "-permit-" + std::to_string(leases_.size());
  acquire(c, name, OwnerToken(owner), pick_ttl(), permits);
}

void Schedule::acquire_nested() {
  const LeaseRecord* outer = pick_lease(true);
  if (!outer) return acquire_new();
  if (outer->permits > 0) return acquire_permit();  // a semaphore never reenters a slot
  auto ttl = pick_ttl();
  while (ttl == outer->state->ttl) ttl = pick_ttl();
  // Copies: acquire() appends to leases_, which may move `outer`.
  const std::size_t c = outer->client;
  const std::string name = outer->name;
  const OwnerToken owner = outer->owner;
  trace_.line("nested in lease #" + std::to_string(outer->id));
  acquire(c, name, owner, ttl);
}

void Schedule::extend() {
  LeaseRecord* lease = pick_lease(false);
  if (!lease) return idle();
  const auto ttl = pick_ttl();
  auto& s = *lease->state;
  trace_.line(label(lease->client) + " extends lease #" + std::to_string(lease->id) + " to ttl " +
              std::to_string(ttl.count()) + "ms");
  // Lease::extend(): under the lease's mutex, as there.
  std::lock_guard lock(s.mu);
  if (s.status == Status::lost || s.hold->lost.load()) {
    s.status = Status::lost;
    ++counts_["extend of a lost lease"];
    trace_.line("=> lost already");
    return;
  }
  const bool after_validity = Clock::now() >= s.valid_until;
  auto r = clients_[lease->client].lock->extend(s.hold->id, ttl, s.valid_until);
  if (after_validity) checker_.renewed_after_expiry(lease->name, s.hold->id.id, Clock::now());
  if (r) {
    s.valid_until = *r;
    ++counts_["extend ok"];
    trace_.line("=> extended, valid for " + ms(*r - Clock::now()));
    return;
  }
  ++counts_["extend failed: " + r.error().code().message()];
  if (r.error().is(errc::lock_lost)) {
    s.status = Status::lost;
    s.hold->lost.store(true);  // a quorum said not there: the reentrant leases go with it
  } else if (r.error().is(errc::timeout)) {
    s.status = Status::lost;  // its validity ended first: this lease only
  }
  trace_.line("=> " + r.error().message());
}

void Schedule::end() {
  LeaseRecord* lease = pick_lease(false);
  if (!lease) return idle();
  end(*lease);
}

void Schedule::end(LeaseRecord& lease) {
  auto& s = *lease.state;
  // Lease::unlock(): only the status change under the lease's mutex.
  {
    std::lock_guard lock(s.mu);
    if (s.status == Status::released) return;
    s.status = Status::released;
  }
  trace_.line(label(lease.client) + " ends lease #" + std::to_string(lease.id));
  const auto ended = clients_[lease.client].holds->end(lease.state);
  ++counts_[ended.last ? "end (last of its hold)" : "end (not last)"];
  trace_.line(ended.last ? (ended.released ? "=> hold released"
                                           : "=> hold release: " + ended.released.error().message())
                         : "=> the hold has other leases");
}

void Schedule::idle() {
  const auto pause = std::chrono::milliseconds(rng_.between(15, 70));
  trace_.line("sleeps " + std::to_string(pause.count()) + "ms");
  sleep_for(pause);
}

void Schedule::restart() {
  const std::size_t n = cluster_->size();
  if (options_.profile == Profile::majority && rng_.chance(0.5)) {
    // A majority at once, starting from a random node.
    const std::size_t first = rng_.below(n);
    for (std::size_t k = 0; k < n / 2 + 1; ++k) cluster_->restart((first + k) % n, "a majority");
    return;
  }
  const std::size_t i = rng_.below(n);
  if (!cluster_->may_restart(i)) {
    trace_.line("node " + std::to_string(i) + " may not restart now (profile)");
    return;
  }
  cluster_->restart(i, "one node");
}

}  // namespace dlock::sim

// SPDX-License-Identifier: MIT
#include "lock/membership.h"

#include <algorithm>
#include <optional>

#include "lock/keys.h"
#include "lock/tally.h"
#include "lock/validity.h"
#include "scripts/script.h"

namespace dlock::lock {
Membership::Membership(node::Fanout& nodes, double drift_factor)
    : nodes_(nodes),
      drift_factor_(drift_factor),
      checked_epoch_(nodes.size(), kUnchecked),
      attempted_epoch_(nodes.size(), kUnchecked),
      retry_at_(nodes.size()),
      quarantine_until_(nodes.size(), Clock::time_point::min()),
      duplicate_(nodes.size(), false),
      join_at_(nodes.size(), Clock::time_point::max()) {}

Membership::View Membership::refresh(std::chrono::milliseconds ttl) {
  std::lock_guard lock(mu_);
  // Greet again when the ttl grows, or a connection is new and not yet greeted: at once after
  // a reconnect, else (a node that did not answer) at most once a second.
  bool stale = ttl > announced_ttl_;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < nodes_.size() && !stale; ++i) {
    const std::uint64_t epoch = nodes_.epoch(i);
    stale = epoch != checked_epoch_[i] && (epoch != attempted_epoch_[i] || start >= retry_at_[i]);
    stale = stale || start >= join_at_[i];  // its quarantine is over: it may join now
  }
  if (stale) greet(std::max(ttl, announced_ttl_));
  View view{std::vector<bool>(nodes_.size()), duplicate_, checked_epoch_};
  // A ttl not every node knows: a node that restarts while such a lock lives could be
  // quarantined for a shorter ttl than the lock's. Nobody votes until it is announced.
  view.ttl_unannounced = ttl > announced_ttl_;
  if (view.ttl_unannounced) return view;
  const auto now = Clock::now();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    view.votes[i] = now >= quarantine_until_[i] && !duplicate_[i];
  }
  return view;
}

void Membership::greet(std::chrono::milliseconds max_ttl) {
  // A reply belongs to a connection only if the connection is the same before and after: a
  // reconnect in between may have reached another process. The first greeting of a new client
  // also makes the connections (their epochs change), so it is asked again, a few times at most,
  // until the epochs hold still around it.
  std::vector<std::uint64_t> epochs(nodes_.size());
  auto hello = [&](std::vector<std::string> joining, std::uint64_t floor) {
    joining.insert(joining.begin(), {std::to_string(max_ttl.count()), std::to_string(floor)});
    std::vector<HelloReply> replies;
    for (const auto& r :
         nodes_.run_script(scripts::hello(),
                           {"dlock:member", "dlock:max-ttl", std::string(kFenceFloorKey)},
                           std::move(joining))) {
      replies.push_back(parse_hello(r));
    }
    return replies;
  };
  std::vector<HelloReply> replies;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) epochs[i] = nodes_.epoch(i);
    replies = hello({}, 0);
    bool settled = true;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (replies[i].ok && nodes_.epoch(i) != epochs[i]) {
        replies[i].ok = false;
        settled = false;
      }
    }
    if (settled) break;
  }
  const auto asked = Clock::now();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    attempted_epoch_[i] = epochs[i];
    retry_at_[i] = asked + std::chrono::seconds(1);
  }
  const MembershipDecision d = decide_membership(replies, nodes_.quorum(), max_ttl);
  if (!d.settled) return;
  std::vector<std::string> joining;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (d.nodes[i].join) joining.push_back(replies[i].run_id);
  }
  std::vector<HelloReply> joined;
  if (!joining.empty()) {
    joined = hello(joining, d.fence_floor);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_.epoch(i) != epochs[i]) joined[i].ok = false;
    }
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = d.nodes[i];
    if (!n.admitted && !n.duplicate) continue;
    duplicate_[i] = n.duplicate;
    join_at_[i] = Clock::time_point::max();
    if (n.join && (!joined[i].ok || joined[i].state != 1)) continue;  // restarted meanwhile
    if (n.quarantine.count() > 0) {
      // Measured by the node's uptime; allow for its clock's drift against ours.
      const auto until = asked + n.quarantine + drift(n.quarantine, drift_factor_);
      quarantine_until_[i] = std::max(quarantine_until_[i], until);
      join_at_[i] = quarantine_until_[i];
    }
    checked_epoch_[i] = epochs[i];
  }
  announced_ttl_ = std::max(announced_ttl_, d.announced);
}

std::vector<std::chrono::milliseconds> Membership::quarantine() {
  (void)refresh(std::chrono::milliseconds(0));
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  std::vector<std::chrono::milliseconds> left;
  for (const auto& until : quarantine_until_) {
    left.push_back(until > now ? std::chrono::ceil<std::chrono::milliseconds>(until - now)
                               : std::chrono::milliseconds(0));
  }
  return left;
}

}  // namespace dlock::lock

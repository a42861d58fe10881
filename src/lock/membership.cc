// SPDX-License-Identifier: MIT
#include "lock/membership.h"

#include <algorithm>
#include <optional>

#include "lock/tally.h"
#include "lock/validity.h"
#include "scripts/script.h"

namespace dlock::lock {
namespace {

struct BootIdentity {
  std::string run_id;
  std::string uptime_seconds;
};

std::optional<BootIdentity> parse_info(const Result<resp::Reply>& r) {
  if (!r || r->type != resp::Reply::Type::string) return std::nullopt;
  auto field = [&](const std::string& name) -> std::string {
    const std::string key = name + ":";
    auto at = r->str.find(key);
    if (at == std::string::npos) return {};
    at += key.size();
    auto end = r->str.find_first_of("\r\n", at);
    return r->str.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  BootIdentity id{field("run_id"), field("uptime_in_seconds")};
  if (id.run_id.empty() || id.uptime_seconds.empty()) return std::nullopt;
  return id;
}

}  // namespace

Membership::Membership(node::Fanout& nodes, double drift_factor)
    : nodes_(nodes),
      drift_factor_(drift_factor),
      checked_epoch_(nodes.size(), kUnchecked),
      attempted_epoch_(nodes.size(), kUnchecked),
      retry_at_(nodes.size()),
      quarantine_until_(nodes.size(), Clock::time_point::min()),
      duplicate_(nodes.size(), false) {}

Membership::View Membership::refresh(std::chrono::milliseconds ttl) {
  std::lock_guard lock(mu_);
  // Greet again when the ttl grows, or a connection is new and not yet greeted: at once after
  // a reconnect, else (a node that did not answer) at most once a second.
  bool stale = ttl > announced_ttl_;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < nodes_.size() && !stale; ++i) {
    const std::uint64_t epoch = nodes_.epoch(i);
    stale = epoch != checked_epoch_[i] && (epoch != attempted_epoch_[i] || start >= retry_at_[i]);
  }
  if (stale) greet(std::max(ttl, announced_ttl_));
  View view{std::vector<bool>(nodes_.size()), duplicate_, checked_epoch_};
  // A ttl not yet announced to a quorum: a node that restarts while such a lock lives would
  // be quarantined for a shorter ttl than the lock's. Nobody votes until it is announced.
  view.ttl_unannounced = ttl > announced_ttl_;
  if (view.ttl_unannounced) return view;
  const auto now = Clock::now();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    view.votes[i] = now >= quarantine_until_[i] && !duplicate_[i];
  }
  return view;
}

void Membership::greet(std::chrono::milliseconds max_ttl) {
  // A run_id belongs to a connection only if the connection is the same before INFO and after
  // hello: a reconnect in between may have reached another process. The first INFO on a new
  // client also makes the connections (their epochs change), so INFO is asked again, a few
  // times at most, until the epochs hold still around it.
  std::vector<std::uint64_t> epochs(nodes_.size());
  std::vector<std::optional<BootIdentity>> ids(nodes_.size());
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) epochs[i] = nodes_.epoch(i);
    node::Outcomes infos = nodes_.run_command({"INFO", "server"});
    bool settled = true;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      ids[i] = parse_info(infos[i]);
      if (ids[i] && nodes_.epoch(i) != epochs[i]) {
        ids[i].reset();
        settled = false;
      }
    }
    if (settled) break;
  }
  std::vector<std::string> args{std::to_string(max_ttl.count()), std::to_string(nodes_.size())};
  std::vector<std::size_t> greeted;  // node indexes, in the order of the hello pairs
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!ids[i]) continue;
    greeted.push_back(i);
    args.insert(args.end(), {ids[i]->run_id, ids[i]->uptime_seconds});
  }
  const auto asked = Clock::now();
  const BootReport report = tally_hello(
      nodes_.run_script(scripts::hello(), {"dlock:boots", "dlock:max-ttl"}, std::move(args)),
      greeted.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    attempted_epoch_[i] = epochs[i];
    retry_at_[i] = asked + std::chrono::seconds(1);
  }
  // A lone node cannot vouch for itself: without a quorum of answers nothing is settled.
  if (report.told < nodes_.quorum()) return;
  const auto largest = std::max(max_ttl, report.max_ttl);
  for (std::size_t k = 0; k < greeted.size(); ++k) {
    const std::size_t i = greeted[k];
    if (nodes_.epoch(i) != epochs[i]) continue;  // reconnected meanwhile: greet again
    // One server named twice (two addresses of one host) would count one vote twice.
    duplicate_[i] = false;
    for (std::size_t j = 0; j < k; ++j) {
      if (ids[greeted[j]]->run_id == ids[i]->run_id) duplicate_[i] = true;
    }
    if (const auto age = report.boot_age[k]; age && *age < largest) {
      // Booted `age` ago by the reporting node's clock; allow for its drift against ours.
      const auto wait = largest - *age;
      quarantine_until_[i] =
          std::max(quarantine_until_[i], asked + wait + drift(wait, drift_factor_));
    }
    checked_epoch_[i] = epochs[i];
  }
  announced_ttl_ = largest;
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

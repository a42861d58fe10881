// SPDX-License-Identifier: MIT
#include "lock/membership.h"

#include <algorithm>
#include <optional>

#include "engine/run.h"
#include "lock/keys.h"
#include "lock/tally.h"
#include "lock/validity.h"
#include "node/server_identity.h"
#include "scripts/script.h"

namespace dlock::lock {
namespace {

struct BootIdentity {
  std::string run_id;
  std::string uptime_seconds;
  // The servers behind the node, by their own run_ids: the run_id for one server; a cluster's
  // or a sentinel node's name them in "servers:" (node/server_identity.h).
  std::vector<std::string> servers;

  bool shares_a_server_with(const BootIdentity& other) const {
    for (const auto& s : servers) {
      if (std::find(other.servers.begin(), other.servers.end(), s) != other.servers.end()) {
        return true;
      }
    }
    return false;
  }
};

std::optional<BootIdentity> parse_info(const Result<resp::Reply>& r) {
  if (!r || r->type != resp::Reply::Type::string) return std::nullopt;
  auto field = [&](std::string_view name) { return node::info_field(r->str, name); };
  BootIdentity id{field("run_id"), field("uptime_in_seconds"), {}};
  if (id.run_id.empty() || id.uptime_seconds.empty()) return std::nullopt;
  const std::string servers = field("servers");
  if (servers.empty()) {
    id.servers.push_back(id.run_id);
  } else {
    for (std::size_t at = 0; at <= servers.size();) {
      const auto comma = std::min(servers.find(',', at), servers.size());
      id.servers.push_back(servers.substr(at, comma - at));
      at = comma + 1;
    }
  }
  return id;
}

}  // namespace

Membership::Membership(node::Fanout& nodes, double drift_factor, Observer* observer)
    : nodes_(nodes),
      drift_factor_(drift_factor),
      observer_(observer),
      mu_([&nodes](std::function<void()> f) { nodes.post(std::move(f)); }),
      checked_epoch_(nodes.size(), kUnchecked),
      attempted_epoch_(nodes.size(), kUnchecked),
      retry_at_(nodes.size()),
      quarantine_until_(nodes.size(), Clock::time_point::min()),
      duplicate_(nodes.size(), false) {}

Membership::View Membership::refresh(std::chrono::milliseconds ttl) {
  return engine::run_sync(refresh_task(ttl));
}

engine::Task<Membership::View> Membership::refresh_task(std::chrono::milliseconds ttl) {
  auto lock = co_await mu_.lock();
  // Greet again when the ttl grows, or a connection is new and not yet greeted: at once after
  // a reconnect, else (a node that did not answer) at most once a second.
  bool stale = ttl > announced_ttl_;
  const auto start = Clock::now();
  for (std::size_t i = 0; i < nodes_.size() && !stale; ++i) {
    const std::uint64_t epoch = nodes_.epoch(i);
    stale = epoch != checked_epoch_[i] && (epoch != attempted_epoch_[i] || start >= retry_at_[i]);
  }
  if (stale) {
    auto greeting = greet(std::max(ttl, announced_ttl_));
    co_await std::move(greeting);
  }
  co_return view_locked(ttl);
}

Membership::View Membership::view_locked(std::chrono::milliseconds ttl) const {
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

engine::Task<bool> Membership::greet(std::chrono::milliseconds max_ttl) {
  // A run_id belongs to a connection only if the connection is the same before INFO and after
  // hello: a reconnect in between may have reached another process. The first INFO on a new
  // client also makes the connections (their epochs change), so INFO is asked again, a few
  // times at most, until the epochs hold still around it.
  std::vector<std::uint64_t> epochs(nodes_.size());
  std::vector<std::optional<BootIdentity>> ids(nodes_.size());
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) epochs[i] = nodes_.epoch(i);
    node::ScriptRound info(nodes_, {"INFO", "server"});
    node::Outcomes infos = co_await info;
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
  node::ScriptRound hello(nodes_, scripts::hello(), {kBootsKey, kMaxTtlKey}, std::move(args));
  const BootReport report = tally_hello(co_await hello, greeted.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    attempted_epoch_[i] = epochs[i];
    retry_at_[i] = asked + std::chrono::seconds(1);
  }
  // A lone node cannot vouch for itself: without a quorum of answers nothing is settled.
  if (report.told < nodes_.quorum()) co_return false;
  const auto largest = std::max(max_ttl, report.max_ttl);
  for (std::size_t k = 0; k < greeted.size(); ++k) {
    const std::size_t i = greeted[k];
    if (nodes_.epoch(i) != epochs[i]) continue;  // reconnected meanwhile: greet again
    // One server named twice (two addresses of one host, or a server URL and a cluster or
    // sentinel URL that reach it) would count one vote twice.
    duplicate_[i] = false;
    for (std::size_t j = 0; j < k; ++j) {
      if (ids[greeted[j]]->shares_a_server_with(*ids[i])) duplicate_[i] = true;
    }
    if (const auto age = report.boot_age[k]; age && *age < largest) {
      // Booted `age` ago by the reporting node's clock; allow for its drift against ours.
      const auto wait = largest - *age;
      const auto until = asked + wait + drift(wait, drift_factor_);
      if (observer_ != nullptr) {
        // Once per quarantine: one that starts now, not one a later greeting lengthens.
        const auto now = Clock::now();
        if (until > now && quarantine_until_[i] <= now) {
          observer_->quarantined(
              QuarantineEvent{i, nodes_.address(i).display(),
                              std::chrono::ceil<std::chrono::milliseconds>(until - now)});
        }
      }
      quarantine_until_[i] = std::max(quarantine_until_[i], until);
    }
    checked_epoch_[i] = epochs[i];
  }
  announced_ttl_ = largest;
  co_return true;
}

std::vector<std::chrono::milliseconds> Membership::quarantine() {
  return engine::run_sync(quarantine_task());
}

engine::Task<std::vector<std::chrono::milliseconds>> Membership::quarantine_task() {
  auto refreshing = refresh_task(std::chrono::milliseconds(0));
  (void)co_await std::move(refreshing);
  auto lock = co_await mu_.lock();
  const auto now = Clock::now();
  std::vector<std::chrono::milliseconds> left;
  for (const auto& until : quarantine_until_) {
    left.push_back(until > now ? std::chrono::ceil<std::chrono::milliseconds>(until - now)
                               : std::chrono::milliseconds(0));
  }
  co_return left;
}

}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
#include "lock/membership.h"

#include <algorithm>
#include <optional>

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

Membership::Membership(node::NodeSet& nodes, double drift_factor)
    : nodes_(nodes),
      drift_factor_(drift_factor),
      checked_epoch_(nodes.size(), kUnchecked),
      attempted_epoch_(nodes.size(), kUnchecked),
      retry_at_(nodes.size()),
      quarantine_until_(nodes.size(), Clock::time_point::min()) {}

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
  if (stale) {
    const auto max_ttl = std::max(ttl, announced_ttl_);
    node::Outcomes infos = nodes_.run_command({"INFO", "server"});
    std::vector<std::string> args{std::to_string(max_ttl.count())};
    std::vector<std::size_t> greeted;  // node indexes, in the order of the hello triples
    std::vector<std::uint64_t> epochs(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      epochs[i] = nodes_.epoch(i);
      auto id = parse_info(infos[i]);
      if (!id) continue;
      greeted.push_back(i);
      args.insert(args.end(), {nodes_.address(i).identity(), id->run_id, id->uptime_seconds});
    }
    const auto asked = Clock::now();
    node::Outcomes replies =
        nodes_.run_script(scripts::hello(), {"dlock:boot", "dlock:max-ttl"}, std::move(args));
    std::size_t told = 0;
    for (const auto& r : replies) {
      if (!r || !r->is_array() || r->elements.size() != greeted.size() + 1) continue;
      ++told;
      for (std::size_t k = 0; k < greeted.size(); ++k) {
        const auto& left = r->elements[k + 1];
        if (!left.is_integer() || left.integer <= 0) continue;
        // Measured on the reporting node's clock; allow for its drift against ours.
        const std::chrono::milliseconds wait(left.integer);
        auto& until = quarantine_until_[greeted[k]];
        until = std::max(until, asked + wait + drift(wait, drift_factor_));
      }
    }
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      attempted_epoch_[i] = epochs[i];
      retry_at_[i] = asked + std::chrono::seconds(1);
    }
    for (std::size_t k = 0; k < greeted.size(); ++k) {
      // Greeted only if a quorum of nodes heard of it: a lone node cannot vouch for itself.
      if (told >= nodes_.quorum()) checked_epoch_[greeted[k]] = epochs[greeted[k]];
    }
    if (told >= nodes_.quorum()) announced_ttl_ = max_ttl;
  }
  View view{std::vector<bool>(nodes_.size()), checked_epoch_};
  const auto now = Clock::now();
  for (std::size_t i = 0; i < nodes_.size(); ++i) view.votes[i] = now >= quarantine_until_[i];
  return view;
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

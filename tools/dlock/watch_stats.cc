// SPDX-License-Identifier: MIT
#include "watch_stats.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace dlock::cli {
namespace {

std::string millis(std::chrono::nanoseconds d) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << std::chrono::duration<double, std::milli>(d).count()
      << "ms";
  return out.str();
}

}  // namespace

WatchStats::NodeWindow& WatchStats::node(std::size_t index, std::string_view address) {
  if (index >= nodes_.size()) nodes_.resize(index + 1);
  NodeWindow& n = nodes_[index];
  if (n.address.empty()) n.address = address;
  return n;
}

void WatchStats::node_request(const NodeRequestEvent& e) noexcept {
  std::lock_guard lock(mu_);
  NodeWindow& n = node(e.node, e.address);
  switch (e.result) {
    case NodeResult::ok:
      ++n.ok;
      break;
    case NodeResult::error:
      ++n.errors;
      break;
    case NodeResult::not_waited_for:
      ++n.not_waited_for;
      return;  // how long it took is unknown
  }
  n.total += e.latency;
  n.max = std::max(n.max, e.latency);
}

void WatchStats::quarantined(const QuarantineEvent& e) noexcept {
  std::lock_guard lock(mu_);
  ++node(e.node, e.address).quarantines;
}

void WatchStats::poll(const LockStatus& status) {
  ++polls_;
  std::size_t answered = 0;
  std::uint64_t fence = 0;
  std::size_t queued = 0;
  first_evicted_.resize(status.nodes.size());
  evicted_.resize(status.nodes.size());
  for (std::size_t i = 0; i < status.nodes.size(); ++i) {
    if (!status.nodes[i].evicted_keys) continue;
    if (!first_evicted_[i]) first_evicted_[i] = status.nodes[i].evicted_keys;
    evicted_[i] = status.nodes[i].evicted_keys;
  }
  for (const auto& n : status.nodes) {
    if (n.error) continue;
    ++answered;
    fence = std::max(fence, n.fence.value());
    queued = std::max(queued, n.queued);
  }
  if (answered < status.quorum) {
    ++unknown_polls_;
    return;
  }
  if (status.held) ++held_polls_;
  queued_ = queued;
  // Never lower: another quorum of nodes may report a smaller counter (one that missed grants,
  // or a smaller floor), and the rise is counted from the highest seen.
  fence_ = std::max(fence_.value_or(0), fence);
  if (!first_fence_) first_fence_ = fence;
  if (!period_fence_) period_fence_ = fence;
  // A name never taken had no counter (0); its first starts from the node's clock, so the rise
  // from 0 counts nothing: the first counter seen counts as one grant (a lower bound).
  if (fence > 0 && *first_fence_ == 0) first_fence_ = fence - 1;
  if (fence > 0 && *period_fence_ == 0) period_fence_ = fence - 1;
}

std::string WatchStats::take_line(std::chrono::nanoseconds period) {
  std::ostringstream out;
  out << "stats " << std::fixed << std::setprecision(1)
      << std::chrono::duration<double>(period).count() << "s:";
  if (fence_) {
    // The counter only grows; a restarted node's floor can make it jump (docs/metrics.md).
    out << " fence " << *fence_ << " (+" << (*fence_ - *period_fence_) << ", +"
        << (*fence_ - *first_fence_) << " since start)";
  } else {
    out << " fence unknown";
  }
  const std::uint64_t known = polls_ - unknown_polls_;
  out << ", held in " << held_polls_ << "/" << known << " polls";
  if (unknown_polls_ > 0) out << " (" << unknown_polls_ << " without a quorum)";
  out << ", " << queued_ << " queued";
  period_fence_ = fence_;
  polls_ = held_polls_ = unknown_polls_ = 0;

  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    NodeWindow& n = nodes_[i];
    const std::uint64_t timed = n.ok + n.errors;
    out << " | " << n.address << " ok " << n.ok << " err " << n.errors;
    if (n.not_waited_for > 0) out << " not-waited-for " << n.not_waited_for;
    if (timed > 0) {
      out << " avg " << millis(n.total / static_cast<std::int64_t>(timed)) << " max "
          << millis(n.max);
    }
    if (n.quarantines > 0) out << " quarantined " << n.quarantines;
    if (i < evicted_.size() && evicted_[i] && *evicted_[i] > *first_evicted_[i]) {
      out << " evicted +" << (*evicted_[i] - *first_evicted_[i]) << " keys since start";
    }
    n = NodeWindow{std::move(n.address)};
  }
  return out.str();
}

}  // namespace dlock::cli

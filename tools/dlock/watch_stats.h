// SPDX-License-Identifier: MIT
// `dlock watch --stats`: what the watch's own polls see, one line per period. Each line has
// the lock's fencing counter (it grows by one per grant, so its rise counts acquisitions by
// every client), how often the lock was held and waited for, and per node the watch's own
// requests: replies, errors, latency, quarantines, and keys the server evicted since the watch
// started (a server that evicts under memory pressure may drop a held lock).
#pragma once

#include <dlock/observer.h>
#include <dlock/status.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

class WatchStats final : public Observer {
 public:
  // From the watch's client (io thread).
  void node_request(const NodeRequestEvent& e) noexcept override;
  void quarantined(const QuarantineEvent& e) noexcept override;

  // Each poll's view of the lock (the watch's thread).
  void poll(const LockStatus& status);

  // The line for the period since the previous one (`period` long), and starts a new period.
  std::string take_line(std::chrono::nanoseconds period);

 private:
  struct NodeWindow {
    std::string address;
    std::uint64_t ok = 0;
    std::uint64_t errors = 0;
    std::uint64_t not_waited_for = 0;
    std::uint64_t quarantines = 0;
    std::chrono::nanoseconds total{0};  // of the requests waited for
    std::chrono::nanoseconds max{0};
  };
  NodeWindow& node(std::size_t index, std::string_view address);  // under mu_

  std::mutex mu_;
  std::vector<NodeWindow> nodes_;  // by node index, as events name them; guarded by mu_
  // Polls (the watch's thread only).
  std::optional<std::uint64_t> first_fence_;
  std::optional<std::uint64_t> period_fence_;  // the fence when this period started
  std::optional<std::uint64_t> fence_;         // the latest
  std::uint64_t polls_ = 0;
  std::uint64_t held_polls_ = 0;
  std::uint64_t unknown_polls_ = 0;  // fewer than a quorum answered
  std::size_t queued_ = 0;           // the latest poll's fair-queue length
  // Per node (status order): the server's evicted_keys at the first poll and the latest.
  std::vector<std::optional<std::uint64_t>> first_evicted_;
  std::vector<std::optional<std::uint64_t>> evicted_;
};

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// RateLimited: a job that asks servers where things are (a cluster's slot map, a sentinel's
// master) and runs one at a time, no more often than once per interval, so a failover costs a
// few questions, not one per failed request. Io thread only.
#pragma once

#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>

#include "net/connection.h"

namespace dlock::node {

class RateLimited {
 public:
  // `start` begins the job; the job calls finished() when it ends, however it ends.
  RateLimited(asio::io_context& io, std::chrono::milliseconds interval, std::function<void()> start)
      : timer_(io), interval_(interval), start_(std::move(start)) {}

  // Starts the job now; or, while it runs, nothing (its answer serves this request too); or,
  // within the interval since the last start, once at the interval's end.
  void request() {
    if (running_) return;
    const auto now = net::Clock::now();
    if (now < allowed_at_) {
      if (!timer_armed_) {
        timer_armed_ = true;
        timer_.expires_at(allowed_at_);
        timer_.async_wait([this](const asio::error_code& ec) {
          timer_armed_ = false;
          if (!ec) request();
        });
      }
      return;
    }
    running_ = true;
    allowed_at_ = now + interval_;
    start_();
  }

  void finished() { running_ = false; }

 private:
  asio::steady_timer timer_;
  const std::chrono::milliseconds interval_;
  const std::function<void()> start_;
  bool running_ = false;
  bool timer_armed_ = false;
  net::Clock::time_point allowed_at_{};
};

}  // namespace dlock::node

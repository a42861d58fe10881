// SPDX-License-Identifier: MIT
#include "node/pending_requests.h"

#include <algorithm>

namespace dlock::node {

void PendingRequests::add(net::Clock::time_point deadline, Go go) {
  entries_.push_back(Entry{deadline, std::move(go)});
  expire();
}

void PendingRequests::release(const Error* failure) {
  auto entries = std::move(entries_);
  entries_.clear();
  timer_.cancel();
  for (auto& entry : entries) entry.go(failure);
}

void PendingRequests::expire() {
  const auto now = net::Clock::now();
  auto next = net::Clock::time_point::max();
  std::vector<Entry> expired;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->deadline <= now) {
      expired.push_back(std::move(*it));
      it = entries_.erase(it);
    } else {
      next = std::min(next, it->deadline);
      ++it;
    }
  }
  if (next != net::Clock::time_point::max()) {
    timer_.expires_at(next);
    timer_.async_wait([this](const asio::error_code& ec) {
      if (!ec) expire();
    });
  }
  const Error timeout(errc::timeout, waiting_for_ + " is not known yet");
  for (auto& entry : expired) entry.go(&timeout);
}

}  // namespace dlock::node

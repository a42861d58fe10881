// SPDX-License-Identifier: MIT
// PendingRequests: what waits until a node knows where to send it (a cluster's first slot map,
// the master a sentinel names): each entry goes on at release(), or fails by its deadline.
// Io thread only.
#pragma once

#include <dlock/result.h>

#include <asio/steady_timer.hpp>
#include <functional>
#include <string>
#include <vector>

#include "net/connection.h"

namespace dlock::node {

class PendingRequests {
 public:
  // Called once: with null to go on, or with the reason it cannot.
  using Go = std::function<void(const Error* failure)>;

  // `waiting_for` names what is awaited, for the timeout's message ("the slot map of ...").
  PendingRequests(asio::io_context& io, std::string waiting_for)
      : timer_(io), waiting_for_(std::move(waiting_for)) {}

  void add(net::Clock::time_point deadline, Go go);
  // Every entry, in the order added: go on (failure null) or fail with `failure`.
  void release(const Error* failure);

 private:
  void expire();

  struct Entry {
    net::Clock::time_point deadline;
    Go go;
  };
  std::vector<Entry> entries_;
  asio::steady_timer timer_;
  const std::string waiting_for_;
};

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
// Trace: the record of one schedule, printed whole when an invariant fails so that the seed can
// be replayed and the failure read: every step (time, client, operation, result) and under it
// every round of calls with each node's fault and reply.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "node/call.h"
#include "resp/reply.h"

namespace dlock::sim {

class Trace {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Trace(Clock::time_point start) : start_(start) {}

  // A new step; later lines belong to it.
  void step(std::size_t index, const std::string& what);
  // A detail of the current step (indented).
  void line(const std::string& text);
  std::string str() const;
  // Milliseconds since the schedule started, as "12.345".
  std::string at(Clock::time_point t) const;

 private:
  Clock::time_point start_;
  std::vector<std::string> lines_;
};

// Short forms for the trace: a call ("acquire sim-a owner=c0-o1 id=..."), a reply ("[1,5,0]").
std::string describe(const node::Call& call);
std::string describe(const resp::Reply& reply);

}  // namespace dlock::sim

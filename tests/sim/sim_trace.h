// SPDX-License-Identifier: MIT
// Trace: the record of one schedule, printed whole when an invariant fails so that the seed can
// be replayed and the failure read: every step (time, client, operation, result) and under it
// every round of calls with each node's fault and reply.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
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

// A digest of a trace's text with every number and every long hex id (hold ids, run_ids) left
// out: those differ between two runs of a seed (times, the library's random hold id prefixes),
// while the steps, calls, faults and kinds of replies do not.
std::uint64_t shape_digest(std::string_view trace);
// shape_digest() of each part of a trace: the lines before the first step, then each step.
std::vector<std::uint64_t> shape_digests(std::string_view trace);

// Short forms for the trace: a call ("acquire sim-a owner=c0-o1 id=..."), a reply ("[1,5,0]").
std::string describe(const node::Call& call);
std::string describe(const resp::Reply& reply);

}  // namespace dlock::sim

// SPDX-License-Identifier: MIT
// What a contention run means: from every worker's acquisitions of one lock, the hand-off
// time (release to acquisition by a worker that was already waiting), each wait, and how often
// a worker that was not waiting (the releaser, coming back) took it ahead of those waiting.
#pragma once

#include <vector>

#include "stats.h"
#include "workloads.h"

namespace dlock::bench {

struct ContentionStats {
  std::size_t acquisitions = 0;
  Summary handoff;           // only hand-offs to a worker that was waiting at the release
  Summary wait;              // every acquisition: acquired - start of its wait
  double barging = 0;        // share of acquisitions that barged in ahead of waiting workers
  std::size_t overlaps = 0;  // acquisitions before the previous holder released: must be 0
};

// `workers[w]` holds worker w's acquisitions, in its own order.
ContentionStats analyze(const std::vector<std::vector<Acquisition>>& workers);

}  // namespace dlock::bench

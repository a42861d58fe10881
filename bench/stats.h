// SPDX-License-Identifier: MIT
// Summaries of timing samples: the benchmark reports medians and tails, never one run's time.
#pragma once

#include <cstdint>
#include <vector>

namespace dlock::bench {

struct Summary {
  std::size_t n = 0;
  double mean = 0;  // all in microseconds
  double p50 = 0;
  double p99 = 0;
  double max = 0;
};

// Samples in nanoseconds; an empty vector gives an all-zero summary.
Summary summarize(std::vector<std::int64_t> samples_ns);

// The median of repeated runs' results (the mean of the middle two for an even count); NaN for
// none.
double median(std::vector<double> v);

// Now on CLOCK_MONOTONIC in nanoseconds: the clock Python's time.monotonic_ns() and Node's
// process.hrtime.bigint() read, so worker processes in any language share one timeline.
std::int64_t monotonic_ns();

}  // namespace dlock::bench

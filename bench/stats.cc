// SPDX-License-Identifier: MIT
#include "stats.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <numeric>

namespace dlock::bench {

Summary summarize(std::vector<std::int64_t> samples_ns) {
  Summary s;
  s.n = samples_ns.size();
  if (samples_ns.empty()) return s;
  std::sort(samples_ns.begin(), samples_ns.end());
  // Nearest-rank percentile: a value that was actually observed.
  const auto rank = [&](double p) {
    const auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(s.n)));
    return static_cast<double>(samples_ns[std::clamp<std::size_t>(k, 1, s.n) - 1]) / 1000.0;
  };
  s.p50 = rank(0.50);
  s.p99 = rank(0.99);
  s.max = static_cast<double>(samples_ns.back()) / 1000.0;
  s.mean = static_cast<double>(std::accumulate(samples_ns.begin(), samples_ns.end(), 0.0L)) /
           static_cast<double>(s.n) / 1000.0;
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace dlock::bench

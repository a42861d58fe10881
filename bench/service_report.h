// SPDX-License-Identifier: MIT
// The service section's part of docs/performance.md and performance.csv (report.cc writes the
// rest and calls these), and its targets (issue 31, "Performance").
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "service_results.h"

namespace dlock::bench {

struct ServiceTarget {
  std::string what;
  std::string measured;
  bool met = false;
};
std::vector<ServiceTarget> service_targets(const ServiceResults& r);

// "## Through the service": the method, the three tables and the placement's caveat.
void write_service_markdown(const ServiceResults& r, std::ostream& md);
// Rows of the csv (section,implementation,nodes_or_inflight,metric,value,unit).
void write_service_csv(const ServiceResults& r, std::ostream& csv);

}  // namespace dlock::bench

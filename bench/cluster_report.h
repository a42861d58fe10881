// SPDX-License-Identifier: MIT
// The cluster section's part of docs/performance.md and performance.csv (report.cc writes the
// rest and calls these).
#pragma once

#include <ostream>

#include "cluster_workloads.h"

namespace dlock::bench {

// "## Redis Cluster": the method, the load table, the redirect table and what they show.
void write_cluster_markdown(const ClusterResults& r, const std::string& placement,
                            std::ostream& md);
// Rows of the csv (section,implementation,nodes_or_inflight,metric,value,unit).
void write_cluster_csv(const ClusterResults& r, std::ostream& csv);

// The targets of issue 14 ("Scale, measured") at 256 in flight: each master's share of the
// CPU (max ÷ min), and the highest CPU per lock of a master of three ÷ the lone master's.
double cluster_share_spread(const ClusterResults& r);
double cluster_cpu_per_lock_ratio(const ClusterResults& r);

}  // namespace dlock::bench

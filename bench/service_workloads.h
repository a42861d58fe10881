// SPDX-License-Identifier: MIT
// The benchmark's service section (issue 31, "Performance"): `dlock serve` on one node through
// gRPC and HTTP/JSON, beside the library measured in the same interleaved rounds: the
// uncontended cycle, many cycles in flight (with the service's and Redis's CPU per cycle), and
// the hand-off to one of several waiting clients. Built only with the service (dlock_proto).
#pragma once

#include <functional>
#include <string>

#include "service_results.h"
#include "service_under_test.h"
#include "workloads.h"

namespace dlock::bench {

// `service` serves the one node on `ports`. `smoke`: a few iterations of each row.
ServiceResults measure_service(const Ports& ports, const ServiceUnderTest& service, bool smoke,
                               const std::function<void(const std::string&)>& say);

}  // namespace dlock::bench

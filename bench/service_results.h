// SPDX-License-Identifier: MIT
// What the service section measures (service_workloads.h) and the report prints
// (service_report.h): data only, so the report builds without gRPC.
#pragma once

#include <cmath>
#include <cstddef>

#include "stats.h"

namespace dlock::bench {

// One way to lock: the library in this process, or `dlock serve` through one transport.
struct ServiceRow {
  Summary cycle;                 // uncontended try-lock + release, 1 node, one client (µs)
  double per_second = NAN;       // cycles per second with `inflight` in flight
  double service_us = NAN;       // the service process's CPU per cycle there (µs; NAN: none)
  double redis_us = NAN;         // the redis-server's CPU per cycle there (µs)
  Summary handoff;               // release to the next grant, `waiters` waiting clients (µs)
  std::size_t overlaps = 0;      // grants before the previous holder released: must be 0
  std::size_t acquisitions = 0;  // under contention, all waiters together
};

struct ServiceResults {
  Summary raw_cycle;   // the raw floor's cycle, measured in the same rounds
  ServiceRow library;  // dlock's own: try_lock + unlock, the asio API in flight, Client::lock
  ServiceRow grpc;
  ServiceRow http;
  int rounds = 0;      // interleaved rounds of each measurement (medians over rounds)
  int inflight = 0;    // cycles in flight (gRPC: one channel; HTTP: that many clients)
  double run_ms = 0;   // per round of the in-flight rows
  int waiters = 0;     // clients waiting for one name
  int hold_us = 0;     // how long each grant is held
  int per_waiter = 0;  // grants each waiter takes
};

}  // namespace dlock::bench

// SPDX-License-Identifier: MIT
// Keep-alive: renewing a set of the caller's leases, like etcd's LeaseKeepAlive. One round
// extends every lease of the set at once (Operations::extend, by owner, through any instance);
// the gRPC KeepAlive stream repeats rounds while it lives (grpc_keepalive.h), the HTTP renew
// endpoint runs one per request (http_routes.h).
//
// Nothing here releases anything: a stream that breaks only stops renewing, and each lease
// ends at the validity last reported to the client, so a client cut off never overlaps the
// next holder.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "service/operations.h"

namespace dlock::service {

// One lease to keep alive: the hold (as for Extend) and the ttl each renewal re-arms.
struct LeaseRenewal {
  HoldRef hold;
  std::int64_t ttl_ms = 0;
};

// What a renewal of one lease said.
struct Renewed {
  std::string name;
  std::string owner;
  std::int64_t validity_ms = 0;  // 0: lost (error says why), or not known to be valid
  std::string error;             // set when the renewal failed
  bool lost = false;             // renewing it stops (not that owner's any more, or bad input)
};

// The most leases one request may name (each is one round trip to the nodes per renewal).
inline constexpr std::size_t kMaxKeepAliveLeases = 1000;

// Checks a set before anything is sent: names, owners, ttls, size. Pure.
std::optional<Failure> check_renewals(const std::vector<LeaseRenewal>& leases);

// One renewal round: extends every lease at once; `done` gets one Renewed per lease, in order,
// on a thread of the operations' pool. A lease that failed for another reason than "not that
// owner's" (no quorum answered in time) is not lost yet: its validity is then what is left of
// `valid_until` (nullopt: unknown, 0).
void renew_all(Operations& ops, const std::vector<LeaseRenewal>& leases,
               std::vector<std::optional<std::chrono::steady_clock::time_point>> valid_until,
               std::function<void(std::vector<Renewed>)> done);

// How long until the next round: a third of the shortest ttl of the set (at least 10 ms), as
// the library's watchdog renews.
std::chrono::milliseconds renew_period(const std::vector<LeaseRenewal>& leases);

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
// The gRPC Watch stream (proto/dlock/v1/lock.proto): a WatchEvent with the name's current
// holder at once, then one per change of holder (watch.h says what a change is). The stream
// reads the name's status every kWatchPeriod on the operations' pool, an asio timer between
// reads (no thread per watch). It ends when the client cancels it (CANCELLED), when the
// service stops (UNAVAILABLE: watch through another instance), or when a client that reads
// nothing lets events pile up (RESOURCE_EXHAUSTED).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <vector>

#include "dlock/v1/lock.grpc.pb.h"
#include "service/guard.h"
#include "service/operations.h"

namespace dlock::service {

class WatchReactor;

// The watches in flight, so that a stopping service ends them at once rather than after
// gRPC's shutdown grace (a watch never ends by itself). Thread-safe.
class Watches {
 public:
  // Starts a watch of request.name for `caller`; gRPC owns the reactor until OnDone. The guard
  // checks the name as for Status (token, name limit, prefixes). After stop_all(), a new
  // watch is answered UNAVAILABLE at once.
  grpc::ServerWriteReactor<v1::WatchEvent>* start(Operations& ops, const Guard& guard,
                                                  const Caller& caller,
                                                  const v1::WatchRequest& request);
  // Ends every watch in flight with UNAVAILABLE, and every later one.
  void stop_all();

 private:
  std::mutex mu_;
  bool stopped_ = false;                             // guarded by mu_
  std::vector<std::weak_ptr<WatchReactor>> active_;  // guarded by mu_
};

}  // namespace dlock::service

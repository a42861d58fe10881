// SPDX-License-Identifier: MIT
// The gRPC KeepAlive stream (proto/dlock/v1/lock.proto): each request names the set of leases to
// renew from then on; the service renews it at once and then every third of its shortest ttl
// (keepalive.h), and answers every round with each lease's new validity, or that it is lost
// (then it is renewed no more). When the stream ends (the client closes or cancels it, the
// connection breaks, the service stops) renewing stops and nothing is released: each lease
// ends at the validity last reported.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <vector>

#include "dlock/v1/lock.grpc.pb.h"
#include "service/guard.h"
#include "service/operations.h"

namespace dlock::service {

// A new stream's reactor; gRPC owns it until OnDone. Every set of leases a request names passes
// `guard` as an Extend of each would (the caller's token, its name prefixes, the ttl's
// maximum) before anything of it is renewed; a refused set ends the stream with the guard's
// status.
grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>* start_keepalive(
    Operations& ops, const Guard& guard, Caller caller);

// A stream that a stopping service ends.
class StoppableStream {
 public:
  virtual ~StoppableStream() = default;
  // Ends the stream with UNAVAILABLE ("the service is stopping"); nothing is released.
  virtual void stop() = 0;
};

// The keep-alive streams in flight, so that a stopping service ends them at once (UNAVAILABLE:
// the client goes on through another instance before its leases' validity ends) rather than
// when gRPC's shutdown grace runs out. Thread-safe.
class KeepAlives {
 public:
  // start_keepalive(), remembered; after stop_all(), a new stream ends at once.
  grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>* start(Operations& ops,
                                                                              const Guard& guard,
                                                                              Caller caller);
  void stop_all();

 private:
  std::mutex mu_;
  bool stopped_ = false;                                // guarded by mu_
  std::vector<std::weak_ptr<StoppableStream>> active_;  // guarded by mu_
};

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
// The gRPC transport of the lock service: dlock.v1.Locks (proto/dlock/v1/lock.proto) on the
// callback API, so a waiting Acquire holds no thread. Each method decodes, calls Operations,
// and encodes; a cancelled call (the client went away, or its deadline passed) cancels the
// wait. KeepAlive is in grpc_keepalive.h, Watch in grpc_watch.h.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "dlock/v1/lock.grpc.pb.h"
#include "service/grpc_keepalive.h"
#include "service/grpc_watch.h"
#include "service/guard.h"
#include "service/operations.h"

namespace dlock::service {

// The trailing metadata of an Acquire refused as held (ABORTED, DEADLINE_EXCEEDED): the
// holder's remaining ttl in ms, decimal (Failure::holder_ttl_ms).
inline constexpr char kHolderTtlTrailer[] = "dlock-holder-ttl-ms";

// The gRPC status for an outcome's Code.
grpc::StatusCode grpc_code(Code code);
// The operations' Mode for the .proto's.
Mode mode_of(v1::Mode mode);

class GrpcLocks final : public dlock::v1::Locks::CallbackService {
 public:
  // Every call passes `guard` (tokens, limits) first.
  GrpcLocks(Operations& ops, Guard& guard) : ops_(ops), guard_(guard) {}

  grpc::ServerUnaryReactor* Acquire(grpc::CallbackServerContext* context,
                                    const v1::AcquireRequest* request,
                                    v1::AcquireResponse* response) override;
  grpc::ServerUnaryReactor* Extend(grpc::CallbackServerContext* context,
                                   const v1::ExtendRequest* request,
                                   v1::ExtendResponse* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse* response) override;
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* context,
                                   const v1::StatusRequest* request,
                                   v1::StatusResponse* response) override;
  // grpc_keepalive.h.
  grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>* KeepAlive(
      grpc::CallbackServerContext* context) override;
  // grpc_watch.h.
  grpc::ServerWriteReactor<v1::WatchEvent>* Watch(grpc::CallbackServerContext* context,
                                                  const v1::WatchRequest* request) override;

  // Ends the watches in flight and refuses new ones (UNAVAILABLE): a stopping service calls it
  // before gRPC's shutdown, which would otherwise wait its grace for streams that never end.
  void stop_watches() { watches_.stop_all(); }
  // The same for the keep-alive streams (UNAVAILABLE); the leases are not released.
  void stop_keepalives() { keepalives_.stop_all(); }

 private:
  Operations& ops_;
  Guard& guard_;
  Watches watches_;
  KeepAlives keepalives_;
};

// Who makes a call: its `authorization` metadata and the peer's IP address.
Caller caller_of(const grpc::ServerContextBase& context);

// Copies what status() returned into the response (the fields of `dlock status --json`).
void fill_status(const LockStatus& status, v1::StatusResponse& out);

}  // namespace dlock::service

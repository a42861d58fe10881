// SPDX-License-Identifier: MIT
// A gRPC server interceptor that records every call (its method, status code and time from
// arrival to status) in EndpointMetrics: one place for all methods, unary and streams alike,
// reflection included; and writes each call's access log line (access_log.h) when asked.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "service/access_log.h"
#include "service/endpoint_metrics.h"
#include "service/guard.h"

namespace dlock::service {

// Pass to grpc::ServerBuilder::experimental().SetInterceptorCreators. `metrics`, `log` and
// `guard` outlive the server; `log` null: no access log (`guard` names the caller's token).
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> endpoint_interceptor(
    EndpointMetrics& metrics, AccessLog* log = nullptr, const Guard* guard = nullptr);

}  // namespace dlock::service

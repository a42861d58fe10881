// SPDX-License-Identifier: MIT
// A gRPC server interceptor that records every call (its method, status code and time from
// arrival to status) in EndpointMetrics: one place for all methods, unary and streams alike,
// reflection included.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "service/endpoint_metrics.h"

namespace dlock::service {

// Pass to grpc::ServerBuilder::experimental().SetInterceptorCreators. `metrics` outlives the
// server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> endpoint_interceptor(
    EndpointMetrics& metrics);

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
#include "service/endpoint_interceptor.h"

#include <chrono>
#include <string>

namespace dlock::service {

namespace {

using grpc::experimental::InterceptionHookPoints;

class EndpointInterceptor final : public grpc::experimental::Interceptor {
 public:
  EndpointInterceptor(EndpointMetrics& metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_.record("grpc", method_, grpc_code_name(methods->GetSendStatus().error_code()),
                      std::chrono::steady_clock::now() - start_);
    }
    methods->Proceed();
  }

 private:
  EndpointMetrics& metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

class EndpointInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit EndpointInterceptorFactory(EndpointMetrics& metrics) : metrics_(metrics) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new EndpointInterceptor(metrics_, info->method() ? info->method() : "unknown");
  }

 private:
  EndpointMetrics& metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> endpoint_interceptor(
    EndpointMetrics& metrics) {
  return std::make_unique<EndpointInterceptorFactory>(metrics);
}

}  // namespace dlock::service

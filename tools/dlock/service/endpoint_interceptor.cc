// SPDX-License-Identifier: MIT
#include "service/endpoint_interceptor.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>

#include <chrono>
#include <string>

#include "service/grpc_service.h"

namespace dlock::service {

namespace {

using grpc::experimental::InterceptionHookPoints;

// The `name` field of a request (every dlock.v1 request that names a lock has one), else "".
std::string name_of(const void* message) {
  const auto* m = static_cast<const google::protobuf::Message*>(message);
  const auto* field = m->GetDescriptor()->FindFieldByName("name");
  if (field == nullptr || field->type() != google::protobuf::FieldDescriptor::TYPE_STRING ||
      field->is_repeated()) {
    return "";
  }
  return m->GetReflection()->GetString(*m, field);
}

class EndpointInterceptor final : public grpc::experimental::Interceptor {
 public:
  EndpointInterceptor(EndpointMetrics& metrics, AccessLog* log, const Guard* guard,
                      grpc::experimental::ServerRpcInfo* info)
      : metrics_(metrics), log_(log), guard_(guard), info_(info) {
    entry_.transport = "grpc";
    entry_.method = info->method() ? info->method() : "unknown";
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (log_) observe(methods);
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      entry_.status = grpc_code_name(methods->GetSendStatus().error_code());
      entry_.duration = std::chrono::steady_clock::now() - start_;
      metrics_.record("grpc", entry_.method, entry_.status, entry_.duration);
      if (log_) log_->write(entry_);
    }
    methods->Proceed();
  }

 private:
  // What the access log says of the caller: its token's id, its address, the lock's name.
  void observe(grpc::experimental::InterceptorBatchMethods* methods) {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      Caller caller = caller_of(*info_->server_context());  // the peer's address
      // The metadata as received here (the context's copy may not be filled in yet).
      const auto* metadata = methods->GetRecvInitialMetadata();
      if (auto it = metadata->find("authorization"); it != metadata->end()) {
        caller.authorization.assign(it->second.data(), it->second.size());
      }
      entry_.peer = caller.address;
      if (guard_) entry_.token = guard_->token_id(caller);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) && !named_ &&
        methods->GetRecvMessage() != nullptr) {
      named_ = true;  // a stream's first message names it
      entry_.name = name_of(methods->GetRecvMessage());
    }
  }

  EndpointMetrics& metrics_;
  AccessLog* log_;
  const Guard* guard_;
  grpc::experimental::ServerRpcInfo* info_;
  AccessEntry entry_;
  bool named_ = false;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

class EndpointInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  EndpointInterceptorFactory(EndpointMetrics& metrics, AccessLog* log, const Guard* guard)
      : metrics_(metrics), log_(log), guard_(guard) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new EndpointInterceptor(metrics_, log_, guard_, info);
  }

 private:
  EndpointMetrics& metrics_;
  AccessLog* log_;
  const Guard* guard_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> endpoint_interceptor(
    EndpointMetrics& metrics, AccessLog* log, const Guard* guard) {
  return std::make_unique<EndpointInterceptorFactory>(metrics, log, guard);
}

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
// A grant whose answer never reached its caller, on a real redis-server (cf9a1f1): the service
// gives it back by owner only when it made the owner for that call. A caller that named its
// own owner may retry under it and get the name again (acquire.lua takes the lost grant's
// older hold of the same client over); giving the lost grant back by owner would then free the
// retry's live hold under its caller, and the next caller would hold the name beside it.
// Over HTTP the route's answer is handled as http_server.cc handles an answer whose write
// failed (response.undelivered). Over gRPC an interceptor cancels the Acquire as its grant is
// about to be sent and holds that answer back until the retry is granted, so that
// AcquireReactor::OnDone sees a cancelled call after the retry: no timing, only order.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "service/grpc_service.h"
#include "service/http_routes.h"
#include "service/operations.h"
#include "support/lock_clients.h"
#include "support/redis_server.h"

namespace dlock::service {
namespace {

using namespace std::chrono_literals;
namespace gx = grpc::experimental;

constexpr char kName[] = "undelivered-job";

// Holds back the answer of the next Acquire granted (a status OK about to be sent) once armed,
// and cancels its call: a caller that hung up while its grant was on its way. The answer goes
// on (and fails) when the test lets it, after the caller's retry.
class LostAnswers {
 public:
  void arm() {
    std::lock_guard lock(mu_);
    armed_ = true;
  }
  // From the interceptor: true when it took this answer (the call is to be cancelled).
  bool take(gx::InterceptorBatchMethods* methods) {
    std::lock_guard lock(mu_);
    if (!armed_) return false;
    armed_ = false;
    held_ = methods;
    return true;
  }
  // The held answer goes on: the call ends, cancelled, and its reactor's OnDone runs. False
  // when none was held.
  bool let_go() {
    gx::InterceptorBatchMethods* held = nullptr;
    {
      std::lock_guard lock(mu_);
      armed_ = false;
      held = std::exchange(held_, nullptr);
    }
    if (held) held->Proceed();
    return held != nullptr;
  }

 private:
  std::mutex mu_;
  bool armed_ = false;
  gx::InterceptorBatchMethods* held_ = nullptr;
};

class LosingInterceptor final : public gx::Interceptor {
 public:
  LosingInterceptor(gx::ServerRpcInfo* info, LostAnswers& lost) : info_(info), lost_(lost) {}
  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(gx::InterceptionHookPoints::PRE_SEND_STATUS) &&
        std::string_view(info_->method()) == "/dlock.v1.Locks/Acquire" &&
        methods->GetSendStatus().ok() && lost_.take(methods)) {
      info_->server_context()->TryCancel();  // the caller sees CANCELLED at once
      return;                                // proceeds in LostAnswers::let_go
    }
    methods->Proceed();
  }

 private:
  gx::ServerRpcInfo* info_;
  LostAnswers& lost_;
};

class LosingInterceptors final : public gx::ServerInterceptorFactoryInterface {
 public:
  explicit LosingInterceptors(LostAnswers& lost) : lost_(lost) {}
  gx::Interceptor* CreateServerInterceptor(gx::ServerRpcInfo* info) override {
    return new LosingInterceptor(info, lost_);
  }

 private:
  LostAnswers& lost_;
};

class ServiceUndeliveredTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DLOCK_REQUIRE_REDIS_OR_SKIP();
    server_ = std::make_unique<test::RedisServer>();
    // Generous node timeouts: a busy machine must not turn a grant into a refusal.
    ops_ = std::make_unique<Operations>(test::client_of({server_->url()}, 10s), 2);
    checker_ = std::make_unique<Client>(test::client_of({server_->url()}, 10s));
    handlers_.ops = ops_.get();
  }
  void TearDown() override { stop(); }

  // POST /v1/locks/{kName}:acquire: the answer the connection would write.
  HttpResponse acquire_over_http(const std::string& body) {
    const HttpRequest request{"POST", std::string("/v1/locks/") + kName + ":acquire", body, {}};
    auto answered = std::make_shared<std::promise<HttpResponse>>();
    auto answer = answered->get_future();
    handle(handlers_, request, ops_->make_pending(),
           [answered](HttpResponse response) { answered->set_value(std::move(response)); });
    return answer.get();
  }

  void start_grpc() {
    guard_ = std::make_unique<Guard>(std::nullopt, Limits{});
    locks_ = std::make_unique<GrpcLocks>(*ops_, *guard_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(locks_.get());
    std::vector<std::unique_ptr<gx::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(std::make_unique<LosingInterceptors>(lost_));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
    grpc_ = builder.BuildAndStart();
    ASSERT_TRUE(grpc_ && port > 0);
    stub_ = v1::Locks::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                   grpc::InsecureChannelCredentials()));
  }
  grpc::Status acquire_over_grpc(const std::string& owner, v1::AcquireResponse& response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 60s);
    v1::AcquireRequest request;
    request.set_name(kName);
    request.set_ttl_ms(60000);
    request.set_owner(owner);
    return stub_->Acquire(&context, request, &response);
  }

  // Stops the transport (gRPC's Shutdown returns once every call's reactor is done), then the
  // operations: ~Operations waits for each one started, the releases of lost grants among
  // them. What the node holds after this is all that will happen.
  void stop() {
    lost_.let_go();  // a test that failed early may have left one: Shutdown would wait for it
    if (grpc_) grpc_->Shutdown(std::chrono::system_clock::now() + 30s);
    grpc_.reset();
    locks_.reset();
    ops_.reset();
  }

  // The owners that hold kName on the node, after stop().
  std::vector<std::string> holders() {
    auto status = checker_->status(kName);
    EXPECT_TRUE(status) << status.error().message();
    std::vector<std::string> owners;
    if (!status) return owners;
    for (const auto& node : status->nodes) {
      for (const auto& holder : node.owners) owners.push_back(holder.owner.str());
    }
    return owners;
  }
  // The retry's caller holds kName alone: another owner is refused, and the caller releases
  // what it was granted.
  void expect_held_by_the_retry_alone(const std::string& owner) {
    EXPECT_EQ(holders(), std::vector<std::string>{owner})
        << "the lost grant was released by owner and freed the retry's hold under its caller";
    auto other = checker_->try_lock(kName, test::fixed(10s, "another-caller"));
    EXPECT_TRUE(!other && other.error().is(errc::lock_held))
        << "a second holder beside the retry's caller";
    EXPECT_TRUE(checker_->unlock(kName, OwnerToken(owner)))
        << "the retry's caller no longer holds what it was granted";
  }

  std::unique_ptr<test::RedisServer> server_;
  std::unique_ptr<Operations> ops_;
  std::unique_ptr<Client> checker_;
  HttpHandlers handlers_;
  LostAnswers lost_;
  std::unique_ptr<Guard> guard_;
  std::unique_ptr<GrpcLocks> locks_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<v1::Locks::Stub> stub_;
};

std::uint64_t token_of(const HttpResponse& response) {
  return std::stoull(nlohmann::json::parse(response.body).at("fencing_token").get<std::string>());
}

// What http_server.cc does with an answer whose write failed, or that found its client gone.
void write_failed(HttpResponse& response) {
  if (response.undelivered) response.undelivered();
}

TEST_F(ServiceUndeliveredTest, HttpACallerNamedOwnersLostGrantLeavesItsRetrysHoldAlone) {
  const std::string body = R"({"owner": "caller-named", "ttl_ms": 60000})";
  HttpResponse lost = acquire_over_http(body);
  ASSERT_EQ(lost.status, 200) << lost.body;
  // The caller never heard of it and retries under its owner: granted again, the lost
  // grant's hold taken over.
  HttpResponse retry = acquire_over_http(body);
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_GT(token_of(retry), token_of(lost));
  // Only then does the first connection's write fail.
  write_failed(lost);
  stop();
  expect_held_by_the_retry_alone("caller-named");
}

TEST_F(ServiceUndeliveredTest, HttpAServiceMadeOwnersLostGrantIsGivenBack) {
  HttpResponse lost = acquire_over_http(R"({"ttl_ms": 60000})");
  ASSERT_EQ(lost.status, 200) << lost.body;
  ASSERT_TRUE(lost.undelivered) << "nobody else can hold under an owner made for this call";
  write_failed(lost);
  stop();
  EXPECT_EQ(holders(), std::vector<std::string>{}) << "the lost grant blocks the name for its ttl";
}

TEST_F(ServiceUndeliveredTest, GrpcACallerNamedOwnersLostGrantLeavesItsRetrysHoldAlone) {
  start_grpc();
  lost_.arm();
  v1::AcquireResponse lost;
  ASSERT_EQ(acquire_over_grpc("caller-named", lost).error_code(), grpc::StatusCode::CANCELLED);
  v1::AcquireResponse retry;
  const auto status = acquire_over_grpc("caller-named", retry);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(retry.owner(), "caller-named");
  // Only then is the first call done, cancelled: its reactor's OnDone runs.
  ASSERT_TRUE(lost_.let_go()) << "no answer was held back";
  stop();
  expect_held_by_the_retry_alone("caller-named");
}

TEST_F(ServiceUndeliveredTest, GrpcAServiceMadeOwnersLostGrantIsGivenBack) {
  start_grpc();
  lost_.arm();
  v1::AcquireResponse lost;
  ASSERT_EQ(acquire_over_grpc("", lost).error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(lost_.let_go()) << "no answer was held back";
  stop();
  EXPECT_EQ(holders(), std::vector<std::string>{}) << "the lost grant blocks the name for its ttl";
}

}  // namespace
}  // namespace dlock::service

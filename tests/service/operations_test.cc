// SPDX-License-Identifier: MIT
// The lock service's pure logic: input checks, how long a wait may last before the caller's
// deadline, owner tokens, the status of each outcome, listener flags; the HTTP routes and
// bodies.
#include "service/operations.h"

#include <gtest/gtest.h>

#include <set>

#include "service/grpc_service.h"
#include "service/http_routes.h"
#include "service/serve_command.h"

namespace dlock::service {
namespace {

using namespace std::chrono_literals;

AcquireInput valid() {
  AcquireInput in;
  in.name = "job";
  in.ttl_ms = 1000;
  return in;
}

TEST(ServiceOperationsTest, AcquireChecksNameTtlWaitAndMode) {
  EXPECT_FALSE(check_acquire(valid()));
  AcquireInput unset_ttl = valid();
  unset_ttl.ttl_ms.reset();  // the default ttl
  EXPECT_FALSE(check_acquire(unset_ttl));
  auto code = [](auto change) {
    AcquireInput in = valid();
    change(in);
    auto failure = check_acquire(in);
    return failure ? failure->code : Code::ok;
  };
  EXPECT_EQ(code([](AcquireInput& in) { in.name.clear(); }), Code::invalid_argument);
  EXPECT_EQ(code([](AcquireInput& in) { in.ttl_ms = 0; }), Code::invalid_argument);
  EXPECT_EQ(code([](AcquireInput& in) { in.ttl_ms = -1; }), Code::invalid_argument);
  EXPECT_EQ(code([](AcquireInput& in) { in.wait_ms = -1; }), Code::invalid_argument);
  EXPECT_EQ(code([](AcquireInput& in) { in.mode = Mode::shared; }), Code::ok);
  // A permit: 1 to 1024 permits, and no owner (the library makes one per permit).
  auto permit = [](std::uint32_t n) {
    return [n](AcquireInput& in) {
      in.mode = Mode::permit;
      in.permits = n;
    };
  };
  EXPECT_EQ(code(permit(1)), Code::ok);
  EXPECT_EQ(code(permit(1024)), Code::ok);
  EXPECT_EQ(code(permit(0)), Code::invalid_argument);
  EXPECT_EQ(code(permit(1025)), Code::invalid_argument);
  EXPECT_EQ(code([&](AcquireInput& in) {
              permit(3)(in);
              in.owner = "mine";
            }),
            Code::invalid_argument);
  EXPECT_EQ(code([](AcquireInput& in) { in.permits = 3; }), Code::invalid_argument);
  EXPECT_TRUE(check_owned(HoldRef{"", "o"}));
  EXPECT_TRUE(check_owned(HoldRef{"job", ""}));
  EXPECT_FALSE(check_owned(HoldRef{"job", "o"}));
  EXPECT_FALSE(check_owned(HoldRef{"job", "o", Mode::shared}));
  EXPECT_FALSE(check_owned(HoldRef{"job", "o", Mode::permit, 1023}));
  EXPECT_TRUE(check_owned(HoldRef{"job", "o", Mode::permit, 1024}));
  EXPECT_TRUE(check_owned(HoldRef{"job", "o", Mode::exclusive, 2}));  // permit without PERMIT
}

TEST(ServiceOperationsTest, AWaitEndsBeforeTheCallersDeadline) {
  const auto now = std::chrono::steady_clock::now();
  AcquireInput in = valid();
  in.wait_ms = 5000;
  EXPECT_EQ(wait_for(in, now), 5000ms);  // no deadline
  in.deadline = now + 60s;
  EXPECT_EQ(wait_for(in, now), 5000ms);  // the deadline is later than the wait
  in.deadline = now + 1000ms;
  EXPECT_EQ(wait_for(in, now), 900ms);  // a tenth of what is left, for the answer
  in.deadline = now + 10s;
  in.wait_ms = 20000;
  EXPECT_EQ(wait_for(in, now), 9900ms);  // at most 100 ms kept back
  in.deadline = now - 1s;
  EXPECT_EQ(wait_for(in, now), 0ms);  // past: try once, never a negative wait
  in.wait_ms = 0;
  in.deadline = now + 1s;
  EXPECT_EQ(wait_for(in, now), 0ms);  // a try stays a try
}

TEST(ServiceOperationsTest, OwnersAreRandomAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string owner = random_owner();
    EXPECT_EQ(owner.size(), 4u + 32u);  // "svc-" and 128 bits in hex
    EXPECT_TRUE(seen.insert(owner).second);
  }
}

TEST(ServiceOperationsTest, EachLibraryErrorHasItsOutcome) {
  EXPECT_EQ(code_for(Error(errc::lock_held, "")), Code::held);
  EXPECT_EQ(code_for(Error(errc::wait_timeout, "")), Code::wait_timeout);
  EXPECT_EQ(code_for(Error(errc::invalid_argument, "")), Code::invalid_argument);
  EXPECT_EQ(code_for(Error(errc::not_owner, "")), Code::not_owner);
  EXPECT_EQ(code_for(Error(errc::lock_lost, "")), Code::not_owner);
  EXPECT_EQ(code_for(Error(errc::cancelled, "")), Code::cancelled);
  for (errc e : {errc::quorum_not_reached, errc::timeout, errc::io_error, errc::server_error,
                 errc::auth_error, errc::script_error, errc::protocol_error}) {
    EXPECT_EQ(code_for(Error(e, "")), Code::unavailable);
  }
}

TEST(ServiceOperationsTest, GrpcStatusesAreTheContracts) {
  EXPECT_EQ(grpc_code(Code::held), grpc::StatusCode::ABORTED);
  EXPECT_EQ(grpc_code(Code::wait_timeout), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(grpc_code(Code::unavailable), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(grpc_code(Code::invalid_argument), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(grpc_code(Code::not_owner), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(grpc_code(Code::cancelled), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(grpc_code(Code::unimplemented), grpc::StatusCode::UNIMPLEMENTED);
}

TEST(ServiceOperationsTest, ListenAddresses) {
  EXPECT_EQ(*cli::listen_address("off"), "");
  EXPECT_EQ(*cli::listen_address("127.0.0.1:7700"), "127.0.0.1:7700");
  EXPECT_EQ(*cli::listen_address("0.0.0.0:0"), "0.0.0.0:0");
  EXPECT_EQ(*cli::listen_address("[::1]:7700"), "[::1]:7700");
  for (const char* bad :
       {"", "7700", ":7700", "host:", "host:70000", "host:7x", "::1:7700", "[::1]7700"}) {
    EXPECT_FALSE(cli::listen_address(bad)) << bad;
  }
}

}  // namespace
}  // namespace dlock::service

namespace dlock::service {
namespace {

TEST(ServiceHttpRoutesTest, PathsMethodsAndPercentEncodedNames) {
  Routed r = route("POST", "/v1/locks/job:acquire");
  EXPECT_EQ(r.route, Route::acquire);
  EXPECT_EQ(r.name, "job");
  EXPECT_TRUE(r.method_ok);
  EXPECT_EQ(route("POST", "/v1/locks/job:extend").route, Route::extend);
  EXPECT_EQ(route("POST", "/v1/locks/job:release").route, Route::release);
  r = route("GET", "/v1/locks/a%2Fb%3Ac%20d");  // '/', ':' and ' ' inside the name
  EXPECT_EQ(r.route, Route::status);
  EXPECT_EQ(r.name, "a/b:c d");
  r = route("POST", "/v1/locks/a%3Ab:release");
  EXPECT_EQ(r.route, Route::release);
  EXPECT_EQ(r.name, "a:b");
  EXPECT_FALSE(route("GET", "/v1/locks/job:acquire").method_ok);
  EXPECT_FALSE(route("POST", "/v1/locks/job").method_ok);
  EXPECT_FALSE(route("POST", "/healthz").method_ok);
  EXPECT_EQ(route("GET", "/healthz?x=1").route, Route::healthz);
  EXPECT_EQ(route("GET", "/readyz").route, Route::readyz);
  EXPECT_EQ(route("GET", "/metrics").route, Route::metrics);
  for (const char* missing : {"/", "/v1/locks/", "/v1/locks/:acquire", "/v1/locks/job:take",
                              "/v1/locks/a/b", "/v2/locks/job"}) {
    EXPECT_EQ(route("POST", missing).route, Route::not_found) << missing;
  }
  EXPECT_TRUE(route("GET", "/v1/locks/bad%2").bad_encoding);
  EXPECT_TRUE(route("GET", "/v1/locks/bad%zz").bad_encoding);
}

TEST(ServiceHttpRoutesTest, PercentDecoding) {
  EXPECT_EQ(*percent_decode("a%41%6a"), "aAj");
  EXPECT_EQ(*percent_decode(""), "");
  EXPECT_FALSE(percent_decode("%"));
  EXPECT_FALSE(percent_decode("%4"));
  EXPECT_FALSE(percent_decode("%g1"));
}

TEST(ServiceHttpRoutesTest, AcquireBodies) {
  auto in = acquire_input("job", "");
  ASSERT_TRUE(std::holds_alternative<AcquireInput>(in));  // every field is optional
  EXPECT_FALSE(std::get<AcquireInput>(in).ttl_ms);
  in = acquire_input("job", R"({"ttl_ms": 500, "wait_ms": 20, "owner": "me", "fair": true,
                                "mode": "EXCLUSIVE"})");
  ASSERT_TRUE(std::holds_alternative<AcquireInput>(in));
  const AcquireInput& got = std::get<AcquireInput>(in);
  EXPECT_EQ(got.name, "job");
  EXPECT_EQ(*got.ttl_ms, 500);
  EXPECT_EQ(got.wait_ms, 20);
  EXPECT_EQ(got.owner, "me");
  EXPECT_TRUE(got.fair);
  EXPECT_EQ(std::get<AcquireInput>(acquire_input("j", R"({"mode": "SHARED"})")).mode, Mode::shared);
  for (const char* bad :
       {"{", "[]", "3", R"({"ttl_ms": "5"})", R"({"ttl_ms": 1.5})", R"({"owner": 5})",
        R"({"fair": 1})", R"({"mode": "ALL"})", R"({"permits": -1})"}) {
    auto failed = acquire_input("job", bad);
    ASSERT_TRUE(std::holds_alternative<Failure>(failed)) << bad;
    EXPECT_EQ(std::get<Failure>(failed).code, Code::invalid_argument) << bad;
  }
  auto owned = owner_input(R"({"owner": "me", "ttl_ms": 100})");
  ASSERT_TRUE(std::holds_alternative<OwnerInput>(owned));
  EXPECT_EQ(std::get<OwnerInput>(owned).owner, "me");
  EXPECT_EQ(*std::get<OwnerInput>(owned).ttl_ms, 100);
  EXPECT_TRUE(std::holds_alternative<Failure>(owner_input(R"({"owner": ["me"]})")));
  auto permit = owner_input(R"({"owner": "me", "mode": "PERMIT", "permit": 2})");
  ASSERT_TRUE(std::holds_alternative<OwnerInput>(permit));
  EXPECT_EQ(std::get<OwnerInput>(permit).mode, Mode::permit);
  EXPECT_EQ(std::get<OwnerInput>(permit).permit, 2u);
  auto shared = owner_input(R"({"owner": "me", "mode": "SHARED"})");
  ASSERT_TRUE(std::holds_alternative<OwnerInput>(shared));
  EXPECT_EQ(std::get<OwnerInput>(shared).mode, Mode::shared);
  for (const char* bad : {R"({"mode": "READ"})", R"({"permit": -1})", R"({"permit": "2"})"}) {
    EXPECT_TRUE(std::holds_alternative<Failure>(owner_input(bad))) << bad;
  }
}

TEST(ServiceHttpRoutesTest, HttpStatusesAreTheContracts) {
  EXPECT_EQ(http_status(Code::ok), 200);
  EXPECT_EQ(http_status(Code::held), 409);
  EXPECT_EQ(http_status(Code::wait_timeout), 409);
  EXPECT_EQ(http_status(Code::not_owner), 409);
  EXPECT_EQ(http_status(Code::unavailable), 503);
  EXPECT_EQ(http_status(Code::invalid_argument), 400);
  EXPECT_EQ(http_status(Code::unimplemented), 501);
  const HttpResponse r = error_response(400, "bad \"name\"");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "{\"error\":\"bad \\\"name\\\"\"}\n");
}

}  // namespace
}  // namespace dlock::service

// SPDX-License-Identifier: MIT
// The lock service's pure logic: input checks, how long a wait may last before the caller's
// deadline, owner tokens, the status of each outcome, listener flags.
#include "service/operations.h"

#include <gtest/gtest.h>

#include <set>

#include "service/grpc_service.h"
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
  EXPECT_EQ(code([](AcquireInput& in) { in.mode = Mode::shared; }), Code::unimplemented);
  EXPECT_EQ(code([](AcquireInput& in) { in.mode = Mode::permit; }), Code::unimplemented);
  EXPECT_TRUE(check_owned("", "o"));
  EXPECT_TRUE(check_owned("job", ""));
  EXPECT_FALSE(check_owned("job", "o"));
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

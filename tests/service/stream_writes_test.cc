// SPDX-License-Identifier: MIT
// StreamWrites (tools/dlock/service/stream_writes.h): a stream's messages go out one at a
// time and in order, a client that does not read is cut off at the limit, and Finish comes
// once, after the write in flight.
#include "service/stream_writes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dlock::service {
namespace {

struct FakeStream {
  std::vector<std::string> started;        // StartWrite, in order
  std::vector<grpc::StatusCode> finished;  // Finish
  StreamWrites<std::string> writes{
      [this](const std::string* m) { started.push_back(*m); },
      [this](const grpc::Status& s) { finished.push_back(s.error_code()); },
      /*max_queued=*/2};
};

TEST(StreamWritesTest, OneWriteAtATimeInOrder) {
  FakeStream s;
  ASSERT_TRUE(s.writes.push("a"));
  ASSERT_TRUE(s.writes.push("b"));
  EXPECT_EQ(s.started, (std::vector<std::string>{"a"}));  // b waits for a's OnWriteDone
  ASSERT_TRUE(s.writes.written(true));
  EXPECT_EQ(s.started, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(s.writes.written(true));
  ASSERT_TRUE(s.writes.push("c"));
  EXPECT_EQ(s.started, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(s.finished.empty());
}

TEST(StreamWritesTest, AClientThatDoesNotReadIsRefusedAtTheLimit) {
  FakeStream s;
  ASSERT_TRUE(s.writes.push("a"));  // in flight
  ASSERT_TRUE(s.writes.push("b"));  // queued: two in all
  EXPECT_FALSE(s.writes.push("c"));
  EXPECT_EQ(s.started, (std::vector<std::string>{"a"}));
}

TEST(StreamWritesTest, FinishWaitsForTheWriteInFlightAndComesOnce) {
  FakeStream s;
  ASSERT_TRUE(s.writes.push("a"));
  ASSERT_TRUE(s.writes.push("b"));
  s.writes.end(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping"));
  s.writes.end(grpc::Status::CANCELLED);  // the first status wins
  EXPECT_TRUE(s.finished.empty());        // gRPC allows no Finish while a write is in flight
  EXPECT_FALSE(s.writes.push("c"));       // nothing more after the end
  ASSERT_TRUE(s.writes.written(true));
  EXPECT_EQ(s.started, (std::vector<std::string>{"a"}));  // b is not written
  EXPECT_EQ(s.finished, (std::vector<grpc::StatusCode>{grpc::StatusCode::UNAVAILABLE}));
  s.writes.end(grpc::Status::OK);
  EXPECT_EQ(s.finished.size(), 1U);
}

TEST(StreamWritesTest, AFailedWriteIsReportedAndTheEndFinishesAtOnce) {
  FakeStream s;
  ASSERT_TRUE(s.writes.push("a"));
  EXPECT_FALSE(s.writes.written(false));  // the stream broke: the reactor ends it
  s.writes.end(grpc::Status::CANCELLED);
  EXPECT_EQ(s.finished, (std::vector<grpc::StatusCode>{grpc::StatusCode::CANCELLED}));
}

TEST(StreamWritesTest, AnIdleStreamFinishesAtOnce) {
  FakeStream s;
  s.writes.end(grpc::Status::OK);
  EXPECT_EQ(s.finished, (std::vector<grpc::StatusCode>{grpc::StatusCode::OK}));
  EXPECT_TRUE(s.started.empty());
}

}  // namespace
}  // namespace dlock::service

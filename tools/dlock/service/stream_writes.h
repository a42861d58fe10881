// SPDX-License-Identifier: MIT
// The messages of one server stream (a keep-alive's answers, a watch's events) and its end.
// gRPC allows one write in flight per stream and no Finish while one is: messages are written
// one at a time, in order, and Finish waits for the write in flight. A client that does not
// read lets at most `max_queued` messages pile up; then the reactor ends the stream.
//
// Not thread-safe: the reactor calls every member under its own mutex.
#pragma once

#include <grpcpp/support/status.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <utility>

namespace dlock::service {

template <typename Message>
class StreamWrites {
 public:
  // `start_write` and `finish` are the reactor's StartWrite and Finish.
  StreamWrites(std::function<void(const Message*)> start_write,
               std::function<void(const grpc::Status&)> finish, std::size_t max_queued)
      : start_write_(std::move(start_write)), finish_(std::move(finish)), max_queued_(max_queued) {}

  // Queues a message and writes it when its turn comes. False (nothing queued) when
  // max_queued are waiting already, or the stream is ending.
  bool push(Message message) {
    if (queued_.size() >= max_queued_ || status_) return false;
    queued_.push_back(std::move(message));
    write_next();
    return true;
  }

  // OnWriteDone's part. False: the write failed, the stream broke (the reactor ends it).
  bool written(bool ok) {
    writing_ = false;
    if (!ok) return false;
    queued_.pop_front();
    if (status_) {
      end(*status_);  // it waited for this write
    } else {
      write_next();
    }
    return true;
  }

  // Ends the stream with `status` (the first one given wins) once no write is in flight;
  // what is still queued is not written.
  void end(grpc::Status status) {
    if (!status_) status_ = std::move(status);
    if (writing_ || finished_) return;
    finished_ = true;
    finish_(*status_);
  }

 private:
  void write_next() {
    if (writing_ || queued_.empty() || status_) return;
    writing_ = true;
    start_write_(&queued_.front());
  }

  std::function<void(const Message*)> start_write_;
  std::function<void(const grpc::Status&)> finish_;
  const std::size_t max_queued_;
  std::deque<Message> queued_;          // the front is being written while writing_
  bool writing_ = false;                // a StartWrite without its OnWriteDone yet
  std::optional<grpc::Status> status_;  // the stream ends with it
  bool finished_ = false;               // Finish called
};

}  // namespace dlock::service

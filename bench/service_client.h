// SPDX-License-Identifier: MIT
// The benchmark's clients of `dlock serve`, in C++ so that the service's cost is what is
// measured, not a slow client's: GrpcLocks (the stubs of dlock_proto) and HttpLocks (libcurl,
// one kept-alive connection). Each is one client: its own connection to the service. Acquire
// lets the service make the owner token, as a client in another language would.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::bench {

class GrpcLocks {
 public:
  // A channel of its own (not shared with another GrpcLocks in this process), connected.
  explicit GrpcLocks(const std::string& address);
  ~GrpcLocks();
  GrpcLocks(GrpcLocks&&) noexcept;
  GrpcLocks& operator=(GrpcLocks&&) noexcept;

  // Acquire (wait_ms 0: a try) and Release; throw std::runtime_error unless granted/released.
  std::string acquire(const std::string& name, std::int64_t wait_ms = 0);
  void release(const std::string& name, const std::string& owner);
  // Cycles per second with `names.size()` Acquire+Release cycles in flight on this one channel
  // (the callback API: no thread per call), each on its own name, for `run`.
  double cycles_in_flight(const std::vector<std::string>& names, std::chrono::milliseconds run);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

class HttpLocks {
 public:
  explicit HttpLocks(const std::string& address);  // HOST:PORT of the HTTP listener
  ~HttpLocks();
  HttpLocks(const HttpLocks&) = delete;
  HttpLocks& operator=(const HttpLocks&) = delete;

  // POST /v1/locks/{name}:acquire and :release; throw std::runtime_error unless 200.
  std::string acquire(const std::string& name, std::int64_t wait_ms = 0);
  void release(const std::string& name, const std::string& owner);

 private:
  std::string path(const std::string& name, const char* verb);
  std::string post(const std::string& path, const std::string& body);
  void* curl_;  // CURL*: one easy handle keeps its connection alive between requests
  void* headers_;
  std::string base_;
  std::string reply_;
};

}  // namespace dlock::bench

// SPDX-License-Identifier: MIT
// The lock service's access log (`dlock serve --access-log FILE`, `-` for stderr; off by
// default, docs/service.md says why): one JSON object a line per call, on either transport,
// written when its answer is made. It names the caller's token by its id (Tokens::id), never
// the token itself, and holds no body: owner tokens, which let a caller release a lock, stay
// out of it. Thread-safe: a line is written whole under a mutex.
#pragma once

#include <dlock/result.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

namespace dlock::service {

struct AccessEntry {
  std::string transport;  // "http" or "grpc"
  std::string method;  // the endpoint: "POST /v1/locks/{name}:acquire", "/dlock.v1.Locks/Acquire"
  std::string name;    // the lock's name, "" when the call names none
  std::string token;   // Tokens::id of the caller's token, "" without one
  std::string peer;    // the client's IP address
  std::string status;  // the HTTP status ("409") or the gRPC code's name ("ABORTED")
  std::chrono::nanoseconds duration{};  // from arrival to answer (a wait's time included)
};

// The JSON line of `entry` at `now` (no newline): {"time": RFC 3339 UTC with µs, "transport",
// "method", "name", "token", "peer", "status" (a number for HTTP, the code's name for gRPC),
// "duration_us"}. Bytes that are not UTF-8 print as U+FFFD. Pure.
std::string access_line(const AccessEntry& entry, std::chrono::system_clock::time_point now);

class AccessLog {
 public:
  // "-": stderr; else the file, appended to (created 0644 if missing). Errors:
  // invalid_argument (cannot open it).
  static Result<std::shared_ptr<AccessLog>> open(const std::string& path);

  void write(const AccessEntry& entry);

 private:
  AccessLog() = default;

  std::mutex mu_;
  std::ofstream file_;  // not open: stderr
};

}  // namespace dlock::service

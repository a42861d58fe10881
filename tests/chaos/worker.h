// SPDX-License-Identifier: MIT
// The chaos runner's worker processes: each loops over critical sections on a fenced counter
// under one lock, through the library's public API only, and prints one history event (a JSON
// line, history.h) per critical section on its standard output, which the controller records.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dlock::chaos {

inline constexpr const char* kName = "chaos:counter";

// CLOCK_MONOTONIC by raw syscall: libfaketime in a skewed worker does not intercept it, so all
// processes' timestamps stay comparable.
std::int64_t real_now_ns();

struct WorkerOptions {
  std::string nodes;  // comma-separated node URLs, spelled as this worker spells them
  std::string resource;
  int id = 0;
  std::chrono::milliseconds ttl{500};
  std::chrono::milliseconds wait{10000};
  bool skewed = false;  // runs under libfaketime: explicit lease, long hold, checks validity
};

// Runs until SIGTERM. SIGUSR1 asks it to stop itself (SIGSTOP) between its next fenced read and
// its write, as a GC pause would; SIGUSR2 withdraws that request. Returns the exit status.
int run_worker(const WorkerOptions& w);

}  // namespace dlock::chaos

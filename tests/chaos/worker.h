// SPDX-License-Identifier: MIT
// The chaos runner's worker processes: each loops over critical sections on a fenced counter
// under one lock, through the library's public API only, and prints one history event (a JSON
// line, history.h) per critical section on its standard output, which the controller records.
#pragma once

#include <dlock/dlock.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "history.h"

namespace dlock::chaos {

inline constexpr const char* kName = "chaos:counter";
inline constexpr const char* kSemaphore = "chaos:permits";  // the permit holders' semaphore
// The async workers' names (async_worker.cc) begin with this: a pool on the one-node lock set
// (chaos:async:solo:<j>) and a pool on all nodes (chaos:async:all:<j>).
inline constexpr const char* kAsyncPrefix = "chaos:async:";

// CLOCK_MONOTONIC by raw syscall: libfaketime in a skewed worker does not intercept it, so all
// processes' timestamps stay comparable.
std::int64_t real_now_ns();

struct WorkerOptions {
  std::string nodes;  // comma-separated node URLs, spelled as this worker spells them
  std::string resource;
  int id = 0;
  std::chrono::milliseconds ttl{500};
  std::chrono::milliseconds wait{10000};
  bool skewed = false;   // runs under libfaketime: explicit lease, long hold, checks validity
  bool nesting = false;  // nests reentrant leases with other ttls (nesting_worker.cc)
  bool reader = false;   // takes the read lock (Client::lock_shared), reads, writes nothing
  unsigned permits = 0;  // > 0: takes one of this many permits of kSemaphore, writes nothing
  unsigned seed = 1;     // a nesting worker's choices
  // > 0: an async worker, this many critical sections in flight through the asio API
  // (async_worker.cc); half of them on a lock set of the one node `solo_node` (a URL spelled
  // as this worker spells it), half on all of `nodes`.
  unsigned inflight = 0;
  std::string solo_node;
};

// The names an async worker with `inflight` critical sections in flight uses, on the one-node
// set (solo) or on all nodes. Every async worker uses the same pools, so the workers contend
// with each other, and two of a worker's own critical sections share each name.
std::size_t async_pool(unsigned inflight);
std::string async_name(bool solo, std::size_t index);
// Every name of both pools: the resources the controller reads back at the end.
std::vector<std::string> async_names(unsigned inflight);

// The largest ttl a nesting worker uses: a restarted node sits out of quorums that long.
inline constexpr std::chrono::milliseconds kNestingMaxTtl{2000};

// Runs until SIGTERM. SIGUSR1 asks it to stop itself (SIGSTOP) between its next fenced read and
// its write, as a GC pause would; SIGUSR2 withdraws that request. Returns the exit status.
int run_worker(const WorkerOptions& w);

// For the worker loops: whether SIGTERM came; whether the controller asked for a pause (true
// once per request); and printing one event for the controller to record.
bool stop_requested();
bool take_pause_request();
void emit(const Event& e);
// An error as an event's detail: what failed, on which nodes.
std::string why(const Error& error);

// An attempt that got nothing (timed out, or failed): its event says why, and is emitted.
void emit_not_acquired(Event& e, const Error& error);
// A lease (or permit) got: when, until when it is valid, and its token.
void record_acquired(Event& e, const Lease& lease);
// The client options every worker uses, for these node URLs (comma-separated).
ClientOptions worker_client_options(const std::string& nodes);

// The nesting worker's loop (nesting_worker.cc), until SIGTERM.
void run_nesting_cycles(const WorkerOptions& w, Client& client, FencedStore& store);
// The async worker (async_worker.cc), until SIGTERM; returns the exit status.
int run_async_worker(const WorkerOptions& w);

}  // namespace dlock::chaos

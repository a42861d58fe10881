// SPDX-License-Identifier: MIT
// dlock/observer.h: Observer, the client's metrics and tracing hooks.
//
// Set ClientOptions::observer and the client reports what it does: every acquisition (its
// outcome and how long it waited), every release (how long the lock was held), every renewal,
// every lost lock, every request to a node (its latency and whether it failed), and every
// quarantine of a restarted node. Unset (the default), nothing is measured (no clock read, no
// allocation): a null check per event and a counter per round. dlock::PrometheusObserver
// (dlock/prometheus.h) is a ready one.
//
//   class Log : public dlock::Observer {
//     void lost(const dlock::LostEvent& e) noexcept override { log("lost", e.name); }
//   };
//   options.observer = std::make_shared<Log>();
//
// Threads: callbacks run on the client's threads: node requests on the io thread (or the
// calling thread for a blocking call), renewals and lost locks on the watchdog's, acquisitions
// and releases on the caller's or the io thread. They may run concurrently, so an Observer must
// be thread-safe, and fast: it must not block or call back into the client. The string_views
// are valid during the call only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dlock {

enum class AcquireOutcome {
  acquired,     // a lease was returned (reentrant acquisitions included)
  contention,   // held by someone else (try_lock), or still held when the wait ended (lock)
  unavailable,  // no quorum of nodes answered in time, or another node-side failure
  cancelled,    // the wait was cancelled (stop_token, asio cancellation)
  invalid,      // bad input (empty name, bad ttl): nothing was sent
};

struct AcquireEvent {
  std::string_view name;
  AcquireOutcome outcome;
  std::chrono::nanoseconds waited;  // from the call to its outcome
  std::size_t attempts;             // rounds sent to the nodes; more than one when lock() waited
  // Of those, the rounds refused because another owner held the lock (rounds refused for want
  // of a quorum are not counted here: that is the nodes, not contention).
  std::size_t contended;
};

struct ReleaseEvent {
  std::string_view name;
  std::chrono::nanoseconds held;  // from the grant to the release
  // false: the lock was lost or had expired before the release, or no quorum confirmed it.
  bool ok;
};

struct RenewEvent {
  std::string_view name;
  bool ok;           // re-armed on a quorum within the validity
  bool by_watchdog;  // false: an explicit Lease::extend / async_extend
};

struct LostEvent {
  std::string_view name;  // the watchdog or an extend found the lock gone or expired
};

enum class NodeResult {
  ok,     // a reply (the lock may still have been refused: that is the reply's content)
  error,  // no reply in time, no connection, a broken connection, or an error reply (BUSY, ...)
  // A blocking call's round had its quorum and gave this node's connection back before the
  // reply (read and dropped later): latency is only how long it was waited for. Often a slow
  // node. Rounds run by the io thread (the asio API, or a blocking call that could not borrow
  // every connection) also return at a quorum, but read every later reply themselves and
  // report it as ok or error with its full latency.
  not_waited_for,
};

struct NodeRequestEvent {
  std::size_t node;          // index in ClientOptions::nodes
  std::string_view address;  // the node's URL, password elided
  std::chrono::nanoseconds latency;
  NodeResult result;
};

struct QuarantineEvent {
  std::size_t node;
  std::string_view address;
  // How long it stays out of quorums from now. Once per quarantine: a greeting that lengthens
  // a running one reports nothing (nor does a node that restarts again while quarantined).
  std::chrono::milliseconds duration;
};

// What a greeting read of a node's server (INFO), at every greeting (about every 30 s).
struct NodeHealthEvent {
  std::size_t node;
  std::string_view address;
  std::uint64_t evicted_keys;  // the server's evicted_keys (a cluster's: all masters' sum)
  // Why the node never votes (a replica; a maxmemory-policy that may evict lock keys), or
  // empty: it may vote.
  std::string_view never_votes;
};

// noexcept: a callback runs in the middle of the client's work (inside a round, on the io or
// watchdog thread); an exception there would leave connections or rounds half done, so an
// observer that throws terminates the process instead. Overrides must be noexcept too.
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void acquired(const AcquireEvent&) noexcept {}
  virtual void released(const ReleaseEvent&) noexcept {}
  virtual void renewed(const RenewEvent&) noexcept {}
  virtual void lost(const LostEvent&) noexcept {}
  virtual void node_request(const NodeRequestEvent&) noexcept {}
  virtual void quarantined(const QuarantineEvent&) noexcept {}
  virtual void node_health(const NodeHealthEvent&) noexcept {}
};

}  // namespace dlock

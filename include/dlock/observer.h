// SPDX-License-Identifier: MIT
// dlock/observer.h: Observer, the client's metrics and tracing hooks.
//
// Set ClientOptions::observer and the client reports what it does: every acquisition (its
// outcome and how long it waited), every release (how long the lock was held), every renewal,
// every lost lock, every request to a node (its latency and whether it failed), and every
// quarantine of a restarted node. Unset (the default), nothing is measured: one null check per
// event. dlock::PrometheusObserver (dlock/prometheus.h) is a ready one.
//
//   class Log : public dlock::Observer {
//     void lost(const dlock::LostEvent& e) override { log("lost " + std::string(e.name)); }
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
  // Rounds sent to the nodes; more than one when lock() waited. Those before the last found
  // the lock held: attempts - 1 is how contended this acquisition was.
  std::size_t attempts;
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
  // The round already had its quorum and stopped waiting for this node (its reply is read and
  // dropped later): latency is only how long it was waited for. Often a slow node.
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
  std::chrono::milliseconds duration;  // how long it stays out of quorums from now
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void acquired(const AcquireEvent&) {}
  virtual void released(const ReleaseEvent&) {}
  virtual void renewed(const RenewEvent&) {}
  virtual void lost(const LostEvent&) {}
  virtual void node_request(const NodeRequestEvent&) {}
  virtual void quarantined(const QuarantineEvent&) {}
};

}  // namespace dlock

// SPDX-License-Identifier: MIT
// ClientCore: what a Client handle and its Leases share: the nodes, the lock algorithm, the
// watchdog and the options. Private to the library.
#pragma once

#include <dlock/lease.h>
#include <dlock/options.h>
#include <dlock/result.h>

#include <asio/ssl.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/in_flight.h"
#include "lock/hand_off.h"
#include "lock/holds.h"
#include "lock/lease_state.h"
#include "lock/quorum_lock.h"
#include "lock/waiters.h"
#include "lock/watchdog.h"
#include "node/node_set.h"

namespace dlock::detail {

class AsyncCancel;

// Bounds that keep every deadline (steady_clock, nanoseconds) far from overflowing.
inline constexpr std::chrono::milliseconds kMaxTtl = std::chrono::hours(24 * 365);
inline constexpr std::chrono::milliseconds kMaxTimeout = std::chrono::hours(1);
// A longer wait is this one: ten years is "forever" for a lock.
inline constexpr std::chrono::milliseconds kMaxWait = std::chrono::hours(24 * 365 * 10);

class ClientCore {
 public:
  static Result<std::shared_ptr<ClientCore>> create(const ClientOptions& options);
  ClientCore(const ClientOptions& options, std::unique_ptr<asio::ssl::context> tls,
             const std::vector<net::NodeAddress>& addresses);

  // Checks a name and ttl; an Error of errc::invalid_argument says what is wrong.
  std::optional<Error> check(std::string_view name, std::chrono::milliseconds ttl) const;
  // A name a lock may have: not empty, and not one of dlock's own keys on the nodes.
  static std::optional<Error> check_name(std::string_view name);

  const ClientOptions& options() const noexcept { return options_; }
  // ClientOptions::observer, or null: every event checks it first.
  Observer* observer() const noexcept { return options_.observer.get(); }
  lock::QuorumLock& algorithm() noexcept { return lock_; }
  lock::Holds& holds() noexcept { return holds_; }
  lock::Watchdog& watchdog() noexcept { return watchdog_; }
  lock::Waiters& waiters() noexcept { return waiters_; }
  lock::HandOff& hand_off() noexcept { return hand_off_; }
  node::NodeSet& nodes() noexcept { return nodes_; }
  std::size_t node_count() const noexcept { return nodes_.size(); }
  std::chrono::milliseconds node_timeout() const noexcept { return options_.node_timeout; }
  // An operation that goes on in the background (the asio API, a release sent from the io
  // thread) holds one from its start to its end: the client's last handle waits for them.
  engine::InFlight::Token started() const { return engine::InFlight::Token(in_flight_); }
  const std::shared_ptr<engine::InFlight>& in_flight() const noexcept { return in_flight_; }
  // The asio API's waits (async_lock, async_lock_shared, async_acquire_permit) still pending:
  // the client's last handle cancels them (src/api/async.cc), as an asio I/O object cancels its
  // operations when it is destroyed.
  void add_pending_wait(std::weak_ptr<AsyncCancel> cancel);
  std::vector<std::shared_ptr<AsyncCancel>> pending_waits();

 private:
  const ClientOptions options_;
  const std::shared_ptr<engine::InFlight> in_flight_ = std::make_shared<engine::InFlight>();
  std::mutex pending_mu_;
  std::vector<std::weak_ptr<AsyncCancel>> pending_waits_;  // guarded by pending_mu_
  std::size_t prune_pending_at_ = 64;                      // guarded by pending_mu_
  // Used by the nodes' TLS streams: declared before them so it is destroyed after them.
  std::unique_ptr<asio::ssl::context> tls_;
  // Declared before the nodes, whose io thread delivers messages to it until it stops.
  lock::Waiters waiters_;
  lock::HandOff hand_off_;
  node::NodeSet nodes_;
  lock::QuorumLock lock_;
  lock::Holds holds_;
  lock::Watchdog watchdog_;  // declared last: its thread stops before the rest goes
};

// Cancels the waits pending on `core` (ClientCore::pending_waits): each completes with
// errc::cancelled at once and leaves its queue place (src/api/async.cc).
void cancel_pending_waits(ClientCore& core);

}  // namespace dlock::detail

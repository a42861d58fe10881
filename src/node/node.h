// SPDX-License-Identifier: MIT
// Node: one lock node as the lock algorithms see it (one vote of a quorum): run a script or a
// plain command, and listen on pub/sub channels. A ServerNode is one Redis server; a
// ClusterNode is a whole Redis Cluster that routes each call to the shard of its keys' slot.
#pragma once

#include <dlock/observer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/connection.h"
#include "node/call.h"

namespace dlock::node {

using MessageHandler = std::function<void(const std::string& channel, const std::string& payload)>;

class Node {
 public:
  virtual ~Node() = default;

  // Sends `call` and calls `done` once with the reply or the failure, by `deadline`. On the io
  // thread, or (a ServerNode only) on a thread that borrowed lendable_connection(). `call` is
  // shared: a retry (NOSCRIPT, a cluster redirect) may come after the round.
  virtual void run(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                   net::Connection::Callback done) = 0;

  // Subscribes to `channel` (kept across reconnections until unsubscribe); `done` gets the
  // server's confirmation. Io thread only.
  virtual void subscribe(const std::string& channel, net::Clock::time_point deadline,
                         net::Connection::Callback done) = 0;
  virtual void unsubscribe(const std::string& channel) = 0;

  // The one command connection a caller thread may borrow for NodeSet's fast path
  // (node/borrowed_run.h), or null when calls need the io thread (a cluster's routing).
  virtual net::Connection* lendable_connection() noexcept = 0;

  // True if the server closed this node's idle command connection (an idle `timeout`, a CLIENT
  // KILL): the next call reconnects, on a new epoch. Any thread. Nodes that cannot tell: false.
  virtual bool closed_by_server() { return false; }

  virtual const net::NodeAddress& address() const noexcept = 0;
  // Changes whenever a connection of this node is replaced (or, for a cluster, a slot changes
  // hands): replies on different epochs may come from different server processes. Any thread.
  virtual std::uint64_t epoch() const noexcept = 0;
};

// How a request ended, for the observer. A round that had its quorum stops waiting for the rest
// (errc::cancelled): reported as such, not as a node failure.
inline NodeResult node_result(const Result<resp::Reply>& r) {
  if (r) return r->is_error() ? NodeResult::error : NodeResult::ok;
  return r.error().is(errc::cancelled) ? NodeResult::not_waited_for : NodeResult::error;
}

// `done`, reporting to `observer` (if any) how the request that it answers ended and how long
// it took from now: node `index`, shown as `display` (which must outlive the request).
inline net::Connection::Callback observed(Observer* observer, std::size_t index,
                                          const std::string& display,
                                          net::Connection::Callback done) {
  if (observer == nullptr) return done;
  return [observer, index, &display, start = net::Clock::now(),
          done = std::move(done)](Result<resp::Reply> r) {
    observer->node_request(
        NodeRequestEvent{index, display, net::Clock::now() - start, node_result(r)});
    done(std::move(r));
  };
}

// A ServerNode or a ClusterNode, as the address says. `observer` (may be null) hears of every
// request run() makes, as node `index`.
std::unique_ptr<Node> make_node(asio::io_context& io, net::NodeAddress address,
                                net::ConnectionOptions options, MessageHandler on_message,
                                std::size_t index, Observer* observer);

}  // namespace dlock::node

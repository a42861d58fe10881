// SPDX-License-Identifier: MIT
// NodeSet: N nodes driven by one io thread; sends requests to all of them at once and gathers
// one outcome per node and request, each bounded by the node timeout, so an operation on N
// nodes costs about one round trip of the slowest node that answers in time.
//
// When every node's connection is idle, run() does the round trip on the caller's thread (see
// net::Connection's fast path): the io thread is not involved, which saves two thread
// hand-offs per round trip. Otherwise the io thread sends and the caller waits.
//
// Thread-safety: run() and its shorthands may be called from any thread except the io thread
// itself; they block the caller until every node answered or timed out (or, with Enough,
// until enough did).
#pragma once

#include <dlock/result.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "net/connection.h"
#include "node/call.h"
#include "node/fanout.h"
#include "node/node.h"
#include "resp/reply.h"
#include "scripts/script.h"

namespace dlock::node {

class NodeSet final : public Fanout {
 public:
  // `on_message` runs on the io thread for every pub/sub message from any node.
  NodeSet(const std::vector<net::NodeAddress>& addresses, net::ConnectionOptions options,
          std::chrono::milliseconds node_timeout, MessageHandler on_message = {});
  ~NodeSet() override;
  NodeSet(const NodeSet&) = delete;
  NodeSet& operator=(const NodeSet&) = delete;

  std::vector<Outcomes> run(const std::vector<Call>& calls, const Enough& enough = {}) override;
  // Subscribes every node to `channel`; returns once each confirmed or timed out.
  Outcomes subscribe(const std::string& channel);
  // Drops the subscription on every node (asynchronously), unless `keep` returns true on the io
  // thread just before: whoever asks can re-check there, in order with every subscribe(), that
  // nobody has wanted the channel again since it decided to drop it.
  void unsubscribe(const std::string& channel, std::function<bool()> keep = {});

  std::size_t size() const noexcept override { return nodes_.size(); }
  const net::NodeAddress& address(std::size_t i) const override { return nodes_[i]->address(); }
  std::uint64_t epoch(std::size_t i) const override { return nodes_[i]->epoch(); }
  std::chrono::milliseconds node_timeout() const noexcept { return node_timeout_; }

 private:
  // Declared first so it is destroyed last: the nodes' sockets and timers belong to it.
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  using Sender = std::function<void(Node&, std::size_t call, net::Clock::time_point,
                                    net::Connection::Callback)>;
  std::vector<Outcomes> gather(std::size_t calls, Sender send, const Enough& enough = {});

  std::vector<std::unique_ptr<Node>> nodes_;
  const std::chrono::milliseconds node_timeout_;
  std::thread thread_;
};

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
// NodeSet: N nodes driven by one io thread; sends one request to all of them at once and
// gathers one outcome per node, each bounded by the node timeout, so an operation on N nodes
// costs about one round trip of the slowest node that answers in time.
//
// Thread-safety: run_script() and run_command() may be called from any thread except the io
// thread itself; they block the caller until every node answered or timed out.
#pragma once

#include <dlock/result.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "net/connection.h"
#include "node/node.h"
#include "resp/reply.h"
#include "scripts/script.h"

namespace dlock::node {

using Outcomes = std::vector<Result<resp::Reply>>;

class NodeSet {
 public:
  NodeSet(const std::vector<net::NodeAddress>& addresses, net::ConnectionOptions options,
          std::chrono::milliseconds node_timeout);
  ~NodeSet();
  NodeSet(const NodeSet&) = delete;
  NodeSet& operator=(const NodeSet&) = delete;

  Outcomes run_script(const scripts::Script& script, const std::vector<std::string>& keys,
                      const std::vector<std::string>& args);
  Outcomes run_command(const std::vector<std::string>& args);

  std::size_t size() const noexcept { return nodes_.size(); }
  // N/2 + 1: any two quorums share at least one node.
  std::size_t quorum() const noexcept { return nodes_.size() / 2 + 1; }
  const net::NodeAddress& address(std::size_t i) const { return nodes_[i]->address(); }
  std::chrono::milliseconds node_timeout() const noexcept { return node_timeout_; }

 private:
  using Sender = std::function<void(Node&, net::Clock::time_point, net::Connection::Callback)>;
  Outcomes gather(Sender send);

  // Declared first so it is destroyed last: the nodes' sockets and timers belong to it.
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::unique_ptr<Node>> nodes_;
  const std::chrono::milliseconds node_timeout_;
  std::thread thread_;
};

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
// Fanout: what the lock algorithms need of N nodes: send calls to all of them at once and get
// one outcome per node. NodeSet is the real one; tests put a simulated one underneath
// QuorumLock and Membership to drive the quorum logic through adversarial schedules (lost
// replies, calls never sent, restarts) without sockets.
#pragma once

#include <dlock/result.h>

#include <cstdint>
#include <string>
#include <vector>

#include "net/node_address.h"
#include "node/call.h"
#include "resp/reply.h"

namespace dlock::node {

using Outcomes = std::vector<Result<resp::Reply>>;  // one per node, in node order

class Fanout {
 public:
  virtual ~Fanout() = default;

  // Sends every call to every node, pipelined, under one deadline. Returns [call][node].
  // `enough` applies to a single call only. Blocks until done.
  virtual std::vector<Outcomes> run(const std::vector<Call>& calls, const Enough& enough = {}) = 0;
  virtual std::size_t size() const noexcept = 0;
  virtual const net::NodeAddress& address(std::size_t i) const = 0;
  // Changes whenever node i's connection is replaced: replies on different epochs may come
  // from different server processes.
  virtual std::uint64_t epoch(std::size_t i) const = 0;

  // N/2 + 1: any two quorums share at least one node.
  std::size_t quorum() const noexcept { return size() / 2 + 1; }

  Outcomes run_script(const scripts::Script& script, std::vector<std::string> keys,
                      std::vector<std::string> args, const Enough& enough = {}) {
    return std::move(run({Call{&script, std::move(keys), std::move(args)}}, enough)[0]);
  }
  Outcomes run_command(std::vector<std::string> args) {
    return std::move(run({Call{nullptr, std::move(args), {}}})[0]);
  }
};

}  // namespace dlock::node

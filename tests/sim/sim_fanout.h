// SPDX-License-Identifier: MIT
// SimFanout: one simulated client's view of the shared nodes, the seam under QuorumLock and
// Membership (node/fanout.h). Each round of calls meets the cluster's faults node by node;
// each node's connection has an epoch that changes whenever the connection is replaced (after
// a fault that broke it, and on every node restart), at once or at the next use, as a real
// client reconnects either eagerly or lazily.
//
// Enough (return at quorum) is honoured: replies arrive in a random order, timeouts last, and
// once enough counted the rest are errc::cancelled for the client although their nodes still
// executed them.
#pragma once

#include <cstdint>
#include <vector>

#include "net/node_address.h"
#include "node/fanout.h"
#include "sim/sim_cluster.h"

namespace dlock::sim {

class SimFanout final : public node::Fanout {
 public:
  SimFanout(SimCluster& cluster, std::size_t client);

  // Every round finishes inline: the simulation is one thread.
  void start(std::vector<node::Call> calls, node::Enough enough, Done done) override;
  void post(std::function<void()> f) override { f(); }
  std::size_t size() const noexcept override { return addresses_.size(); }
  const net::NodeAddress& address(std::size_t i) const override { return addresses_[i]; }
  std::uint64_t epoch(std::size_t i) const override { return epochs_[i]; }

  // The connection to node i broke: it is replaced now, or when next used.
  void drop(std::size_t i, bool reconnect_now);

 private:
  std::vector<node::Outcomes> round(const std::vector<node::Call>& calls,
                                    const node::Enough& enough);
  // What node i did with the round: one outcome per call.
  std::vector<Result<resp::Reply>> deliver(std::size_t i, Fault fault,
                                           const std::vector<node::Call>& calls);
  // Connects node i if its connection is down (a new epoch).
  void use(std::size_t i);
  // The order in which the nodes' outcomes reach the client: random, timeouts last.
  std::vector<std::size_t> arrival(const std::vector<Fault>& faults);

  SimCluster& cluster_;
  const std::size_t client_;
  std::vector<net::NodeAddress> addresses_;
  std::vector<std::uint64_t> epochs_;
  std::vector<bool> connected_;
};

}  // namespace dlock::sim

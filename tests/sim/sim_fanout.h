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
//
// The record window (node/record_window.h) as a plain server node keeps it: per node, what a
// granted acquisition that checked the max-ttl record taught, bound to the connection epoch it
// was answered on. An acquisition the window covers goes with its record_known_value (acquire.lua
// then skips the record) only on the connection that is up (a request bound to an epoch never
// goes on the next one), and only when it goes alone: the simulation puts every batchable call
// in a batch call, of one when nothing joins it, which the real client sends alone
// (SimCluster::execute then runs it alone, with what the window knows); a batch call holding
// others runs it as built, and so does a late run or a call a batch left alone. A grant teaches
// the window whether its call ran alone or as a batch of one (acquire_batch.lua leaves the
// record as acquire.lua does; the real client learns from lone calls only, so the simulation
// skips the check more often than it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "net/node_address.h"
#include "node/fanout.h"
#include "node/record_window.h"
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
  // `calls` as node i is sent them alone at `sent`: a lone acquisition that node i's record
  // window covers, with its record_known_value (nullopt: as built, which checks the record).
  std::optional<std::vector<node::Call>> record_known(std::size_t i, Fault fault,
                                                      const std::vector<node::Call>& calls,
                                                      net::Clock::time_point sent) const;
  // After node i answered `calls` as built: a grant teaches its window.
  void learn(std::size_t i, const std::vector<node::Call>& calls,
             const std::vector<Result<resp::Reply>>& replies, net::Clock::time_point sent);

  SimCluster& cluster_;
  const std::size_t client_;
  std::vector<net::NodeAddress> addresses_;
  std::vector<std::uint64_t> epochs_;
  std::vector<bool> connected_;
  std::vector<std::unique_ptr<node::RecordWindow>> windows_;  // per node
};

}  // namespace dlock::sim

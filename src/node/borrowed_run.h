// SPDX-License-Identifier: MIT
// run_borrowed: NodeSet::start's fast path. Borrows every node's idle command connection and
// drives the round on the calling thread: the same requests, queues and reply matching as on
// the io thread (net::Connection), but the calling thread writes them to every node at once and
// polls all sockets, until every node answered, enough did (return at quorum), or the deadline
// passed.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "node/call.h"
#include "node/fanout.h"
#include "node/node.h"

namespace dlock::node {

// [call][node] outcomes, or nullopt (nothing sent) when some connection was not idle.
//
// Neither `calls` nor the round's bookkeeping outlives the call: every request's callback has
// run by the time it returns (with its reply, a timeout, or the abandonment that give_back()
// hands to requests still waiting; also when something throws inside it), so the nodes are
// handed `calls` without a share of it and the round lives on the stack (issue 32: no
// allocation for either).
std::optional<std::vector<Outcomes>> run_borrowed(const std::vector<std::unique_ptr<Node>>& nodes,
                                                  const std::vector<Call>& calls,
                                                  net::Clock::time_point deadline,
                                                  const Enough& enough);
// The same for one call: its outcomes, one per node.
std::optional<Outcomes> run_borrowed(const std::vector<std::unique_ptr<Node>>& nodes,
                                     const Call& call, net::Clock::time_point deadline,
                                     const Enough& enough);

}  // namespace dlock::node

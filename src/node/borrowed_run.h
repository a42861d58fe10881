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
std::optional<std::vector<Outcomes>> run_borrowed(
    const std::vector<std::unique_ptr<Node>>& nodes,
    const std::shared_ptr<const std::vector<Call>>& calls, net::Clock::time_point deadline,
    const Enough& enough);

}  // namespace dlock::node

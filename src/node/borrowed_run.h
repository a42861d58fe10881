// SPDX-License-Identifier: MIT
// run_borrowed: NodeSet::run's fast path. Borrows every node's idle command connection and
// does the whole exchange on the calling thread: writes the calls to every node at once,
// then polls all sockets and reads replies as they come, until every node answered, enough
// did (return at quorum), or the deadline passed.
#pragma once

#include <dlock/result.h>

#include <memory>
#include <optional>
#include <vector>

#include "node/call.h"
#include "node/node.h"

namespace dlock::node {

// [call][node] outcomes, or nullopt (nothing sent) when some connection was not idle.
std::optional<std::vector<std::vector<Result<resp::Reply>>>> run_borrowed(
    const std::vector<std::unique_ptr<Node>>& nodes, const std::vector<Call>& calls,
    net::Clock::time_point deadline, const Enough& enough);

}  // namespace dlock::node

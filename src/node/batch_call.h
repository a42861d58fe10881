// SPDX-License-Identifier: MIT
// Group commit's shapes (docs/protocol.md, "Group commit"): the one batch call that carries
// several calls with the same batch form (node::BatchForm), and the check of its reply before
// it is split, one element per call. The coalescer (node/coalescer.h) sends what these build;
// the simulation (tests/sim/sim_fanout.cc) builds its batch calls here too, so that the model of
// the batch scripts is run on exactly the calls a server gets.
#pragma once

#include <cstddef>
#include <vector>

#include "node/call.h"
#include "resp/reply.h"

namespace dlock::node {

// The batch call of `calls` (at least one; all with the first's batch script, replica guard
// and node keys): the first call's node keys once, then each call's item keys and item
// arguments in the order of `calls`; the guard of the first.
Call batch_call(const std::vector<const Call*>& calls);

// `reply`, the reply to a batch call of `items` calls, as it is split: an error reply stays as
// it is (every call gets it); an array of `items` elements is split (element i for call i, nil:
// the call sent alone); anything else is answered as an error reply for every call.
resp::Reply checked_batch_reply(resp::Reply reply, std::size_t items);

}  // namespace dlock::node

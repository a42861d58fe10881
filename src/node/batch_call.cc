// SPDX-License-Identifier: MIT
#include "node/batch_call.h"

#include <bit>
#include <string>
#include <utility>

namespace dlock::node {
namespace {

// Appends the strings of `from` whose bit is set in `mask`, in order.
void select(Strings& to, const Strings& from, std::uint32_t mask) {
  for (std::size_t i = 0; i < from.size() && i < 32; ++i) {
    if ((mask >> i & 1U) != 0) to.push_back(from[i]);
  }
}

}  // namespace

Call batch_call(const std::vector<const Call*>& calls) {
  const Call& first = *calls.front();
  const BatchForm& form = first.batch;
  Call merged;
  merged.script = form.script;
  merged.min_replicas = first.min_replicas;
  merged.replica_timeout = first.replica_timeout;
  select(merged.keys, first.keys, form.node_keys);
  const int node_keys = std::popcount(form.node_keys);
  merged.node_keys = node_keys == 0 ? 0 : (std::uint32_t{1} << node_keys) - 1;
  for (const Call* call : calls) {
    select(merged.keys, call->keys, call->batch.item_keys);
    select(merged.args, call->args, call->batch.item_args);
  }
  return merged;
}

resp::Reply checked_batch_reply(resp::Reply reply, std::size_t items) {
  if (reply.is_error() || (reply.is_array() && reply.elements.size() == items)) return reply;
  resp::Reply wrong;
  wrong.type = resp::Reply::Type::error;
  wrong.str =
      "ERR group commit: a batch reply of " +
      (reply.is_array() ? std::to_string(reply.elements.size()) + " elements" : "no array") +
      " for " + std::to_string(items) + " calls";
  return wrong;
}

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
// The boot identity of a lock node that is more than one server (a Redis Cluster) or may move
// to another server (a Sentinel-managed master), for lock/membership.h's restart protection.
//
// A server's part is its run_id (a new process) and its master_replid (a replica promoted to
// master takes a new one, also when it was master before): either changing means its keys may
// not be the ones clients were granted (a cluster adds the slots each master serves and its
// config epoch: a slot may change master without its keys, node/cluster_node.h). The node
// reports one digest of all parts as its run_id, with an uptime of 0: when a promotion happened
// is not known, and 0 can only make a quarantine start later (at the first greeting that sees
// the new identity), never end sooner.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "resp/reply.h"

namespace dlock::node {

// The value of `field` in an INFO reply ("field:value" on a line of its own), or empty.
std::string info_field(const std::string& info, std::string_view field);

// "run_id/master_replid" of a master's INFO reply (sections server and replication); empty if
// either is missing or the server is not a master (role:master).
std::string master_identity(const std::string& info);

// True if the server may drop keys that have a ttl (every lock key has one) under memory
// pressure: a maxmemory limit with any maxmemory-policy but noeviction. INFO's memory section.
bool may_evict(const std::string& info);

// The INFO reply the node gives for these parts: "run_id:<digest of the sorted parts>",
// "uptime_in_seconds:0", and "servers:<run_id>,<run_id>...", the servers' own run_ids, by which
// one server named twice (a redis:// URL and a sentinel URL of the same master) votes once.
// `infos` are the servers' own INFO replies: the first that may evict keys (may_evict) lends
// its maxmemory and maxmemory_policy lines, and evicted_keys is their sum, so the lock layer
// judges eviction the same way for every node kind.
resp::Reply identity_reply(std::vector<std::string> parts,
                           const std::vector<std::string>& infos = {});

}  // namespace dlock::node

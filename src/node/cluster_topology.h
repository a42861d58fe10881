// SPDX-License-Identifier: MIT
// What CLUSTER SLOTS says about a Redis Cluster (which master serves which slots), what CLUSTER
// NODES says about the replicas of the server asked, and what a redirection error (MOVED, ASK)
// says. Pure parsing, no sockets.
#pragma once

#include <dlock/result.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "resp/reply.h"

namespace dlock::node {

struct SlotRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;  // inclusive
  std::string host;
  std::uint16_t port = 0;
  std::string id;  // the master's node id (empty if the server did not say)
};

// The masters of a CLUSTER SLOTS reply. A master announced with an empty or "?" endpoint is at
// `asked_host` (the server that answered). Errors: errc::protocol_error saying what is wrong;
// an error reply (a server without cluster support) as errc::invalid_argument.
Result<std::vector<SlotRange>> parse_cluster_slots(const resp::Reply& reply,
                                                   std::string_view asked_host);

// The replicas the server that answered CLUSTER NODES (the line flagged "myself") has, by its
// own table, as "ip:port": every node whose master field is its id, unless the cluster agreed it
// failed ("fail"). A replica that is paused, cut off or only suspected ("fail?") is named: it
// may still be promoted with what it had (INFO's connected_slaves leaves out disconnected ones).
// A failed one cannot win a majority's votes while it is failed, and the flag clears once the
// masters reach it again; naming it would refuse every new ttl until CLUSTER FORGET, as
// SENTINEL REPLICAS' s_down replicas are left out for the same reason (docs/safety.md).
// nullopt: no "myself" line (not a CLUSTER NODES reply), or "myself" is no master (demoted:
// its replicas are not the ones that must have what it wrote).
std::optional<std::vector<std::string>> replica_addresses_of_myself(std::string_view cluster_nodes);
// How many replica_addresses_of_myself names.
std::optional<std::size_t> replicas_of_myself(std::string_view cluster_nodes);

// The replicas connected to the master that answered INFO (replication) now, as "ip:port"
// (its slave<N> lines, whatever their state). nullopt: the server is no master.
std::optional<std::vector<std::string>> connected_replicas(std::string_view info);

// How many replicas WAIT must count so that every `promotable` one (the replicas a failover may
// promote) has the record: |promotable ∪ connected|, matched by "ip:port". Only a connected
// replica acknowledges, so if a promotable one is not connected fewer than that can answer and
// WAIT fails; if all are, every connected replica must answer, those among them. A replica left
// out of `promotable` (s_down, "fail") that still acknowledges cannot stand in for one that
// lacks the record. Addresses that do not match (announce-ip setups) only make it larger: a
// refusal, the safe side.
std::size_t replicas_to_wait_for(std::vector<std::string> promotable,
                                 const std::vector<std::string>& connected);

struct Redirect {
  bool ask = false;  // ASK: this request only; MOVED: the slot has moved for good
  std::uint16_t slot = 0;
  std::string host;
  std::uint16_t port = 0;
};

// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 [::1]:6381" (or ":6381": the host of the server
// that said it); nullopt for any other reply.
std::optional<Redirect> parse_redirect(const resp::Reply& reply);

}  // namespace dlock::node

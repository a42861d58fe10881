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

// How many replicas the server that answered CLUSTER NODES (the line flagged "myself") has, by
// its own table: every node whose master field is its id, unless the cluster agreed it failed
// ("fail"). A replica that is paused, cut off or only suspected ("fail?") is counted: it may
// still be promoted with what it had (INFO's connected_slaves leaves out disconnected ones). A
// failed one cannot win a majority's votes while it is failed, and the flag clears once the
// masters reach it again; counting it would refuse every new ttl until CLUSTER FORGET, as
// SENTINEL REPLICAS' s_down replicas are left out for the same reason (docs/safety.md).
// nullopt: no "myself" line (not a CLUSTER NODES reply), or "myself" is no master (demoted:
// its replicas are not the ones that must have what it wrote).
std::optional<std::size_t> replicas_of_myself(std::string_view cluster_nodes);

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

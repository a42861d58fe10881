// SPDX-License-Identifier: MIT
// NodeAddress: one lock node as given by a URL: a Redis server (redis://, rediss://), a whole
// Redis Cluster named by one of its servers (redis-cluster://, rediss-cluster://), or the master
// that Redis Sentinels name (redis-sentinel://).
#pragma once

#include <dlock/result.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::net {

struct NodeAddress {
  enum class Kind { server, cluster, sentinel };
  Kind kind = Kind::server;
  bool tls = false;
  std::string host;  // name or IP literal, without IPv6 brackets
  std::uint16_t port = 6379;
  std::string user;  // ACL user; empty with a password alone means "default"
  std::string password;
  int db = 0;  // always 0 for a cluster
  // A sentinel node: the sentinels to ask (host and port; the first is also host and port
  // above) and the name they know the master by. User and password are the master's.
  std::vector<std::pair<std::string, std::uint16_t>> sentinels;
  std::string master_name;

  // This address with another host and port (a cluster's shard), as a server.
  NodeAddress server_at(std::string other_host, std::uint16_t other_port) const;

  // redis://user@host:port/db, never with the password: safe for logs and error messages.
  std::string display() const;
  // host:port in lower case: two addresses with the same identity are the same server.
  std::string identity() const;
};

// Parses redis://[user:password@]host[:port][/db] and rediss://... (userinfo percent-decoded,
// IPv6 literals in brackets), and redis-cluster://[user:password@]host[:port] and
// rediss-cluster://... (no database: a cluster has only database 0), and
// redis-sentinel://[user:password@]host[:port][,host[:port]...]/MASTER (sentinel port 26379 by
// default). Errors: errc::invalid_argument saying what is wrong.
Result<NodeAddress> parse_node_url(std::string_view url);

}  // namespace dlock::net

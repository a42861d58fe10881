// SPDX-License-Identifier: MIT
// NodeAddress: one Redis node as given by a redis:// or rediss:// URL.
#pragma once

#include <dlock/result.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::net {

struct NodeAddress {
  bool tls = false;
  std::string host;  // name or IP literal, without IPv6 brackets
  std::uint16_t port = 6379;
  std::string user;  // ACL user; empty with a password alone means "default"
  std::string password;
  int db = 0;

  // redis://user@host:port/db, never with the password: safe for logs and error messages.
  std::string display() const;
  // host:port in lower case: two addresses with the same identity are the same server.
  std::string identity() const;
};

// Parses redis://[user:password@]host[:port][/db] and rediss://... (userinfo percent-decoded,
// IPv6 literals in brackets). Errors: errc::invalid_argument saying what is wrong.
Result<NodeAddress> parse_node_url(std::string_view url);

}  // namespace dlock::net

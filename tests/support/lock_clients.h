// SPDX-License-Identifier: MIT
// The clients and lock options the integration tests use, in one place: a client with the
// tests' timeouts, and a lease that ends after its ttl (fixed) or is renewed (renewed).
#pragma once

#include <dlock/dlock.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::test {

// A client of `nodes`: `node_timeout` per node, reconnecting after 20 to 200 ms (the tests kill
// and restart servers). Bad options are the test's own error: thrown.
// `options` as given (nodes, and whatever else the test sets), reconnecting after 20 to 200 ms.
inline Client client_from(ClientOptions options) {
  options.reconnect_backoff_min = std::chrono::milliseconds(20);
  options.reconnect_backoff_max = std::chrono::milliseconds(200);
  auto c = Client::create(options);
  if (!c) throw std::runtime_error(c.error().message());
  return std::move(c).value();
}

inline Client client_of(const std::vector<std::string>& nodes,
                        Millis node_timeout = std::chrono::milliseconds(500)) {
  ClientOptions options;
  options.nodes = nodes;
  options.node_timeout = node_timeout;
  return client_from(std::move(options));
}

// Renewed by the watchdog while held; `owner` empty: the thread's default owner.
inline LockOptions renewed(Millis ttl, std::string owner = {}) {
  LockOptions o;
  o.ttl = ttl;
  o.auto_renew = true;
  if (!owner.empty()) o.owner = OwnerToken(std::move(owner));
  return o;
}

// Not renewed: the lease ends after `ttl`.
inline LockOptions fixed(Millis ttl, std::string owner = {}) {
  LockOptions o = renewed(ttl, std::move(owner));
  o.auto_renew = false;
  return o;
}

}  // namespace dlock::test

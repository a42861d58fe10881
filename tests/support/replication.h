// SPDX-License-Identifier: MIT
// Replication in tests: a master and its replica started as the tests start them, a server's
// INFO fields, whether a replica is in sync; and waiting for a master's replicas to have
// everything it wrote so far, for tests that fail a master over and need to know what its
// replica had. (WAIT on a test's own fresh connection does not do it: WAIT waits only for the
// writes of the connection that sends it.)
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "support/redis_server.h"

namespace dlock::test {

// INFO `section` of `server` (on a fresh connection), or empty if it did not answer.
std::string info_text(const RedisServer& server, const std::string& section);

// The value of `field` in INFO `section` of `server`, or empty.
std::string info_field(const RedisServer& server, const std::string& section,
                       const std::string& field);

// A replica whose link to its master is up.
bool in_sync(const RedisServer& replica);

// A master that starts a replica's sync at once (Redis 7 waits 5 s for more replicas), with
// `extra` arguments.
ServerOptions quick_master(std::vector<std::string> extra = {});

// A replica of `master` from the start, with `extra` arguments.
ServerOptions replica_of(const RedisServer& master, std::vector<std::string> extra = {});

// `info` returns the master's INFO replication text (empty if it did not answer). True once
// every replica's acknowledged offset reached the master's offset at the call; false after
// `limit`.
bool replicas_caught_up(const std::function<std::string()>& info,
                        std::chrono::milliseconds limit = std::chrono::seconds(10));

}  // namespace dlock::test

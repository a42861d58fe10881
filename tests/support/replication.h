// SPDX-License-Identifier: MIT
// Waiting for a master's replicas to have everything it wrote so far, for tests that fail a
// master over and need to know what its replica had. (WAIT on a test's own fresh connection
// does not do it: WAIT waits only for the writes of the connection that sends it.)
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace dlock::test {

// `info` returns the master's INFO replication text (empty if it did not answer). True once
// every replica's acknowledged offset reached the master's offset at the call; false after
// `limit`.
bool replicas_caught_up(const std::function<std::string()>& info,
                        std::chrono::milliseconds limit = std::chrono::seconds(10));

}  // namespace dlock::test

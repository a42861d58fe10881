// SPDX-License-Identifier: MIT
// One command to a local server by hiredis, for the processes the sandbox and the tests start
// (cluster and sentinel set-up, health checks): not the library's path to Redis.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::sandbox {

struct RedisReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

// Sends `args` to 127.0.0.1:port on a fresh connection (AUTH first if `password` is set, then
// SELECT `db` unless 0), each step within `timeout`; null if the server does not answer. The
// tests' support (tests/support) sends its commands through this too.
RedisReply redis_command(std::uint16_t port, const std::string& password,
                         const std::vector<std::string>& args, int db = 0,
                         std::chrono::milliseconds timeout = std::chrono::seconds(1));

}  // namespace dlock::sandbox

// SPDX-License-Identifier: MIT
#include "redis_command.h"

namespace dlock::sandbox {
namespace {

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};

}  // namespace

RedisReply redis_command(std::uint16_t port, const std::string& password,
                         const std::vector<std::string>& args, int db,
                         std::chrono::milliseconds timeout) {
  const timeval tv{static_cast<time_t>(timeout.count() / 1000),
                   static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  std::unique_ptr<redisContext, ContextDeleter> c(redisConnectWithTimeout("127.0.0.1", port, tv));
  if (!c || c->err != 0) return nullptr;
  redisSetTimeout(c.get(), tv);
  if (!password.empty()) {
    RedisReply(static_cast<redisReply*>(redisCommand(c.get(), "AUTH %s", password.c_str())));
  }
  if (db != 0) RedisReply(static_cast<redisReply*>(redisCommand(c.get(), "SELECT %d", db)));
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  return RedisReply(static_cast<redisReply*>(
      redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lengths.data())));
}

}  // namespace dlock::sandbox

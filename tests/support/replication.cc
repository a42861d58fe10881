// SPDX-License-Identifier: MIT
#include "support/replication.h"

#include <cstdlib>
#include <thread>

#include "node/server_identity.h"

namespace dlock::test {
namespace {

// The smallest "offset=N" of the "slaveK:..." lines, or -1 without a replica.
long long slowest_replica(const std::string& info) {
  long long slowest = -1;
  for (std::size_t at = info.find("\nslave"); at != std::string::npos;
       at = info.find("\nslave", at + 1)) {
    const auto line_end = info.find('\n', at + 1);
    const auto offset = info.find("offset=", at);
    if (offset == std::string::npos || offset > line_end) continue;
    const long long n = std::atoll(info.c_str() + offset + 7);
    slowest = slowest < 0 ? n : std::min(slowest, n);
  }
  return slowest;
}

}  // namespace

std::string info_text(const RedisServer& server, const std::string& section) {
  auto r = server.command({"INFO", section});
  if (!r || r->type != REDIS_REPLY_STRING) return {};
  return std::string(r->str, r->len);
}

std::string info_field(const RedisServer& server, const std::string& section,
                       const std::string& field) {
  const std::string text = info_text(server, section);
  const auto at = text.find(field + ":");
  if (at == std::string::npos) return {};
  const auto from = at + field.size() + 1;
  return text.substr(from, text.find_first_of("\r\n", from) - from);
}

bool in_sync(const RedisServer& replica) {
  return info_field(replica, "replication", "master_link_status") == "up";
}

ServerOptions quick_master(std::vector<std::string> extra) {
  extra.insert(extra.begin(), {"--repl-diskless-sync-delay", "0"});
  return with(std::move(extra));
}

ServerOptions replica_of(const RedisServer& master, std::vector<std::string> extra) {
  extra.insert(extra.begin(), {"--replicaof", "127.0.0.1", std::to_string(master.port())});
  return with(std::move(extra));
}

bool replicas_caught_up(const std::function<std::string()>& info, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  const long long target = std::atoll(node::info_field(info(), "master_repl_offset").c_str());
  while (std::chrono::steady_clock::now() < until) {
    const long long slowest = slowest_replica(info());
    if (slowest >= 0 && slowest >= target) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace dlock::test

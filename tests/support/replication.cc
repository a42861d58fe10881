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

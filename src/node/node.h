// SPDX-License-Identifier: MIT
// Node: one Redis master as the lock algorithms see it: run a script, run a plain command.
#pragma once

#include <string>
#include <vector>

#include "net/connection.h"
#include "scripts/script.h"

namespace dlock::node {

class Node {
 public:
  Node(asio::io_context& io, net::NodeAddress address, net::ConnectionOptions options)
      : connection_(io, std::move(address), options) {}

  // Runs `script` by EVALSHA; on NOSCRIPT (a restarted or flushed server has lost its script
  // cache) sends the full source once by EVAL, within the same deadline. Io thread only.
  void eval(const scripts::Script& script, const std::vector<std::string>& keys,
            const std::vector<std::string>& args, net::Clock::time_point deadline,
            net::Connection::Callback done);

  // Sends any command (args[0] is its name). Io thread only.
  void command(const std::vector<std::string>& args, net::Clock::time_point deadline,
               net::Connection::Callback done);

  const net::NodeAddress& address() const noexcept { return connection_.address(); }
  std::uint64_t epoch() const noexcept { return connection_.epoch(); }

 private:
  net::Connection connection_;
};

}  // namespace dlock::node

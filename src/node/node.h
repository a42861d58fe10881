// SPDX-License-Identifier: MIT
// Node: one Redis master as the lock algorithms see it: run a script, run a plain command, and
// listen on pub/sub channels (on a second connection of its own, as RESP2 requires).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "net/connection.h"
#include "node/call.h"
#include "scripts/script.h"

namespace dlock::node {

using MessageHandler = std::function<void(const std::string& channel, const std::string& payload)>;

class Node {
 public:
  Node(asio::io_context& io, net::NodeAddress address, net::ConnectionOptions options,
       MessageHandler on_message);

  // Runs `script` by EVALSHA; on NOSCRIPT (a restarted or flushed server has lost its script
  // cache) sends the full source once by EVAL, within the same deadline. Io thread only.
  void eval(const scripts::Script& script, const std::vector<std::string>& keys,
            const std::vector<std::string>& args, net::Clock::time_point deadline,
            net::Connection::Callback done);

  // Sends any command (args[0] is its name). Io thread only.
  void command(const std::vector<std::string>& args, net::Clock::time_point deadline,
               net::Connection::Callback done);

  // Subscribes to `channel` (kept across reconnections until unsubscribe); `done` gets the
  // server's confirmation. Io thread only.
  void subscribe(const std::string& channel, net::Clock::time_point deadline,
                 net::Connection::Callback done);
  void unsubscribe(const std::string& channel);

  // The encoded request for `call`: EVALSHA, or with full_source EVAL, or the plain command.
  static std::string encode(const Call& call, bool full_source);
  // The command connection, for the caller-driven fast path (NodeSet::run).
  net::Connection& connection() noexcept { return connection_; }

  const net::NodeAddress& address() const noexcept { return connection_.address(); }
  std::uint64_t epoch() const noexcept { return connection_.epoch(); }

 private:
  net::Connection connection_;
  net::Connection subscriber_;
  std::set<std::string> channels_;  // io thread only
  const std::chrono::milliseconds resubscribe_timeout_;
};

}  // namespace dlock::node

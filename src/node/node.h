// SPDX-License-Identifier: MIT
// Node: one Redis master as the lock algorithms see it: run a script, run a plain command, and
// listen on pub/sub channels (on a second connection of its own, as RESP2 requires).
#pragma once

#include <dlock/observer.h>

#include <functional>
#include <memory>
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
  // `observer` (may be null) hears of every request run() makes, as node `index`.
  Node(asio::io_context& io, net::NodeAddress address, net::ConnectionOptions options,
       MessageHandler on_message, std::size_t index = 0, Observer* observer = nullptr);

  // Sends (*calls)[c]: a script by EVALSHA, and on NOSCRIPT (a restarted or flushed server has
  // lost its script cache) once more with the full source by EVAL, within the same deadline;
  // or a plain command. On the io thread, or on a thread that borrowed the command connection
  // (NodeSet's fast path). `calls` is shared: the NOSCRIPT retry may come after the round.
  void run(std::shared_ptr<const std::vector<Call>> calls, std::size_t c,
           net::Clock::time_point deadline, net::Connection::Callback done);

  // Subscribes to `channel` (kept across reconnections until unsubscribe); `done` gets the
  // server's confirmation. Io thread only.
  void subscribe(const std::string& channel, net::Clock::time_point deadline,
                 net::Connection::Callback done);
  void unsubscribe(const std::string& channel);

  // The command connection, for the caller-driven fast path (node/borrowed_run.h).
  net::Connection& connection() noexcept { return connection_; }

  const net::NodeAddress& address() const noexcept { return connection_.address(); }
  std::uint64_t epoch() const noexcept { return connection_.epoch(); }

 private:
  // Declared before the connections, so they outlive any callback a connection runs as it goes.
  const std::size_t index_;
  Observer* const observer_;
  const std::string display_;  // the address for the observer (password elided)
  net::Connection connection_;
  net::Connection subscriber_;
  std::set<std::string> channels_;  // io thread only
  const std::chrono::milliseconds resubscribe_timeout_;
};

}  // namespace dlock::node

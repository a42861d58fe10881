// SPDX-License-Identifier: MIT
#include "node/borrowed_run.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "node/round_outcomes.h"

namespace dlock::node {

std::optional<std::vector<Outcomes>> run_borrowed(
    const std::vector<std::unique_ptr<Node>>& nodes,
    const std::shared_ptr<const std::vector<Call>>& calls, net::Clock::time_point deadline,
    const Enough& enough) {
  const std::size_t n = nodes.size();
  std::vector<net::Connection*> connections(n);
  for (std::size_t i = 0; i < n; ++i) {
    connections[i] = nodes[i]->lendable_connection();
    if (connections[i] == nullptr) return std::nullopt;  // a cluster: the io thread routes
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!connections[i]->try_borrow()) {
      for (std::size_t j = 0; j < i; ++j) {
        connections[j]->give_back(Error(errc::cancelled, "not sent"));
      }
      return std::nullopt;
    }
  }
  // Shared: a reply this round stops waiting for reaches it later, from whoever reads it.
  auto round = std::make_shared<RoundOutcomes>(calls->size(), n, enough);
  for (std::size_t c = 0; c < calls->size(); ++c) {
    for (std::size_t i = 0; i < n; ++i) {
      nodes[i]->run(calls, c, deadline,
                    [round, c, i](Result<resp::Reply> r) { round->add(c, i, std::move(r)); });
    }
  }

  std::vector<pollfd> fds;
  std::vector<std::size_t> fd_node;
  for (;;) {
    // Writes what is queued (the round, then EVAL retries after NOSCRIPT).
    for (auto* connection : connections) connection->borrowed_flush(deadline);
    if (round->complete()) break;
    const auto now = net::Clock::now();
    auto next = net::Clock::time_point::max();
    for (auto* connection : connections) next = std::min(next, connection->borrowed_expire(now));
    if (round->complete()) break;
    fds.clear();
    fd_node.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (!connections[i]->borrowed_waiting()) continue;
      fds.push_back(pollfd{connections[i]->borrowed_fd(), POLLIN, 0});
      fd_node.push_back(i);
    }
    if (fds.empty() || next == net::Clock::time_point::max()) break;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - now);
    const int ready =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(left.count(), 0)));
    if (ready < 0 && errno != EINTR) break;
    for (std::size_t k = 0; k < fds.size() && ready > 0; ++k) {
      if (fds[k].revents != 0) connections[fd_node[k]]->borrowed_read();
    }
  }

  std::vector<Outcomes> out = round->take(round->complete());
  for (auto* connection : connections) {
    connection->give_back(Error(errc::cancelled, "not waited for: a quorum had answered"));
  }
  return out;
}

}  // namespace dlock::node

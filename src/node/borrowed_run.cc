// SPDX-License-Identifier: MIT
#include "node/borrowed_run.h"

#include <poll.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "node/round_outcomes.h"

namespace dlock::node {
namespace {

// Per-node scratch of a round: on the stack for up to kInline nodes (every deployment we know
// of), so that the fast path's own bookkeeping allocates nothing.
template <typename T>
class NodeScratch {
 public:
  explicit NodeScratch(std::size_t n) : n_(n) {
    if (n_ > kInline) heap_.resize(n_);
  }
  T* data() { return n_ > kInline ? heap_.data() : inline_.data(); }
  T& operator[](std::size_t i) { return data()[i]; }

 private:
  static constexpr std::size_t kInline = 8;
  std::size_t n_;
  std::array<T, kInline> inline_{};
  std::vector<T> heap_;
};

}  // namespace

std::optional<std::vector<Outcomes>> run_borrowed(
    const std::vector<std::unique_ptr<Node>>& nodes,
    const std::shared_ptr<const std::vector<Call>>& calls, net::Clock::time_point deadline,
    const Enough& enough) {
  const std::size_t n = nodes.size();
  NodeScratch<net::Connection*> connections(n);
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

  // One entry per node; a node with nothing to wait for has fd -1, which poll() skips.
  NodeScratch<pollfd> fds(n);
  for (;;) {
    // Writes what is queued (the round, then EVAL retries after NOSCRIPT).
    for (std::size_t i = 0; i < n; ++i) connections[i]->borrowed_flush(deadline);
    if (round->complete()) break;
    const auto now = net::Clock::now();
    auto next = net::Clock::time_point::max();
    for (std::size_t i = 0; i < n; ++i) {
      next = std::min(next, connections[i]->borrowed_expire(now));
    }
    if (round->complete()) break;
    bool waiting = false;
    for (std::size_t i = 0; i < n; ++i) {
      const bool w = connections[i]->borrowed_waiting();
      fds[i] = pollfd{w ? connections[i]->borrowed_fd() : -1, POLLIN, 0};
      waiting = waiting || w;
    }
    if (!waiting || next == net::Clock::time_point::max()) break;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - now);
    const int ready = ::poll(fds.data(), n, static_cast<int>(std::max<long>(left.count(), 0)));
    if (ready < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < n && ready > 0; ++i) {
      if (fds[i].revents != 0) connections[i]->borrowed_read();
    }
  }

  std::vector<Outcomes> out = round->take(round->complete());
  // Built once: most rounds abandon nothing, and the message would be an allocation per node.
  static const Error abandoned(errc::cancelled, "not waited for: a quorum had answered");
  for (std::size_t i = 0; i < n; ++i) connections[i]->give_back(abandoned);
  return out;
}

}  // namespace dlock::node

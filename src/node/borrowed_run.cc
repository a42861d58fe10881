// SPDX-License-Identifier: MIT
#include "node/borrowed_run.h"

#include <poll.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <cstdint>
#include <utility>

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

// A request's callback: its outcome into the round, at [call][node]. Two words, trivially
// copyable: std::function keeps it in place, without an allocation per request.
struct Answer {
  RoundOutcomes* round;
  std::uint32_t call;
  std::uint32_t node;
  Answer(RoundOutcomes* r, std::size_t c, std::size_t i)
      : round(r), call(static_cast<std::uint32_t>(c)), node(static_cast<std::uint32_t>(i)) {}
  void operator()(Result<resp::Reply> r) const { round->add(call, node, std::move(r)); }
};

// Built at start, not in ~Loan() while an exception unwinds.
const Error kEndedByAnException(errc::cancelled, "not waited for: the round ended by an exception");

// The round's loan of every node's command connection. Ending it (give_back(), or the
// destructor when something threw inside run_borrowed) gives every connection back, and with
// it runs every request's callback still waiting (with `abandoned`): nothing is left on loan,
// and no connection keeps a callback pointing into run_borrowed's frame or a view of the
// caller's calls. Declared after the round, so the callbacks it runs still find it.
class Loan {
 public:
  explicit Loan(std::size_t n) : connections_(n), n_(n) {}
  Loan(const Loan&) = delete;
  Loan& operator=(const Loan&) = delete;
  ~Loan() { give_back(kEndedByAnException); }

  // Borrows every node's command connection, or none (false): a cluster's calls need the io
  // thread to route them, and a busy connection the io thread to queue them.
  bool borrow_all(const std::vector<std::unique_ptr<Node>>& nodes) {
    for (std::size_t i = 0; i < n_; ++i) {
      connections_[i] = nodes[i]->lendable_connection();
      if (connections_[i] == nullptr) return false;
    }
    for (std::size_t i = 0; i < n_; ++i) {
      if (!connections_[i]->try_borrow()) {
        lent_ = i;
        give_back(Error(errc::cancelled, "not sent"));
        return false;
      }
    }
    lent_ = n_;
    return true;
  }
  net::Connection& operator[](std::size_t i) { return *connections_[i]; }

  // Ends the loan: the requests still waiting get `abandoned`. Once only.
  void give_back(const Error& abandoned) {
    for (; lent_ > 0; --lent_) connections_[lent_ - 1]->give_back(abandoned);
  }

 private:
  NodeScratch<net::Connection*> connections_;
  const std::size_t n_;
  std::size_t lent_ = 0;  // connections_[0, lent_) are borrowed
};

// The round of `count` calls at `calls` on borrowed connections; `take(round, cut_short)` makes
// what it returns, before the connections are given back.
template <typename Take>
auto drive(const std::vector<std::unique_ptr<Node>>& nodes, const Call* calls, std::size_t count,
           net::Clock::time_point deadline, const Enough& enough, Take take)
    -> std::optional<decltype(take(std::declval<RoundOutcomes&>(), true))> {
  const std::size_t n = nodes.size();
  RoundOutcomes round(count, n, enough);
  Loan connections(n);  // after `round`: given back before it goes, also by an exception
  if (!connections.borrow_all(nodes)) return std::nullopt;
  for (std::size_t c = 0; c < count; ++c) {
    // Not shared (see borrowed_run.h): a share with no owner, so the nodes keep nothing alive.
    const std::shared_ptr<const Call> unowned(std::shared_ptr<void>(), &calls[c]);
    for (std::size_t i = 0; i < n; ++i) nodes[i]->run(unowned, deadline, Answer{&round, c, i});
  }

  // One entry per node; a node with nothing to wait for has fd -1, which poll() skips.
  NodeScratch<pollfd> fds(n);
  for (;;) {
    // Writes what is queued (the round, then EVAL retries after NOSCRIPT).
    for (std::size_t i = 0; i < n; ++i) connections[i].borrowed_flush(deadline);
    if (round.complete()) break;
    const auto now = net::Clock::now();
    auto next = net::Clock::time_point::max();
    for (std::size_t i = 0; i < n; ++i) {
      next = std::min(next, connections[i].borrowed_expire(now));
    }
    if (round.complete()) break;
    bool waiting = false;
    for (std::size_t i = 0; i < n; ++i) {
      const bool w = connections[i].borrowed_waiting();
      fds[i] = pollfd{w ? connections[i].borrowed_fd() : -1, POLLIN, 0};
      waiting = waiting || w;
    }
    if (!waiting || next == net::Clock::time_point::max()) break;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - now);
    const int ready = ::poll(fds.data(), n, static_cast<int>(std::max<long>(left.count(), 0)));
    if (ready < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < n && ready > 0; ++i) {
      if (fds[i].revents != 0) connections[i].borrowed_read();
    }
  }

  auto out = take(round, round.complete());
  // Built once: most rounds abandon nothing, and the message would be an allocation per node.
  static const Error abandoned(errc::cancelled, "not waited for: a quorum had answered");
  connections.give_back(abandoned);
  // What lets `round` and `calls` live on the caller's stack: no callback is left to run.
  assert(round.heard() == count * n);
  return out;
}

}  // namespace

std::optional<std::vector<Outcomes>> run_borrowed(const std::vector<std::unique_ptr<Node>>& nodes,
                                                  const std::vector<Call>& calls,
                                                  net::Clock::time_point deadline,
                                                  const Enough& enough) {
  return drive(nodes, calls.data(), calls.size(), deadline, enough,
               [](RoundOutcomes& round, bool cut_short) { return round.take(cut_short); });
}

std::optional<Outcomes> run_borrowed(const std::vector<std::unique_ptr<Node>>& nodes,
                                     const Call& call, net::Clock::time_point deadline,
                                     const Enough& enough) {
  return drive(nodes, &call, 1, deadline, enough,
               [](RoundOutcomes& round, bool cut_short) { return round.take_one(cut_short); });
}

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
// NodeSet: N nodes driven by one io thread; sends requests to all of them at once and gathers
// one outcome per node and request, each bounded by the node timeout, so an operation on N
// nodes costs about one round trip of the slowest node that answers in time.
//
// One engine for both APIs: a round started on a thread that may block (a blocking call, the
// watchdog), with every node's connection idle, is done on that thread (see net::Connection's
// fast path): the io thread is not involved, which saves two thread hand-offs per round trip.
// Otherwise (connections busy, or started on the io thread, as every asio operation is) the io
// thread sends, pipelined behind what is in flight, and finishes the round when the replies
// are in.
//
// Thread-safety: start() and post() may be called from any thread; run() and subscribe() from
// any thread but the io thread (they wait).
#pragma once

#include <dlock/result.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <variant>
#include <vector>

#include "net/connection.h"
#include "node/call.h"
#include "node/fanout.h"
#include "node/node.h"
#include "resp/reply.h"
#include "scripts/script.h"

namespace dlock::node {

class NodeSet final : public Fanout {
 public:
  // `on_message` runs on the io thread for every pub/sub message from any node.
  // `observer` (may be null) hears of every request to every node.
  NodeSet(const std::vector<net::NodeAddress>& addresses, net::ConnectionOptions options,
          std::chrono::milliseconds node_timeout, MessageHandler on_message = {},
          Observer* observer = nullptr);
  ~NodeSet() override;
  NodeSet(const NodeSet&) = delete;
  NodeSet& operator=(const NodeSet&) = delete;

  // Whom a round calls back: with [call][node], or with the one call's outcomes.
  using Finish = std::variant<Done, DoneOne>;

  void start(std::vector<Call> calls, Enough enough, Done done) override;
  void start_one(Call call, Enough enough, DoneOne done) override;
  void post(std::function<void()> f) override { asio::post(io_, std::move(f)); }
  // post() without a std::function around `handler`: it goes in asio's own operation, one
  // allocation instead of two (the asio API posts the start of every operation: issue 32).
  template <typename Handler>
  void post_handler(Handler&& handler) {
    asio::post(io_, std::forward<Handler>(handler));
  }
  // Subscribes every node to `channel`; `done` gets each node's confirmation or failure (on
  // the io thread).
  void subscribe(const std::string& channel, Done done);
  // subscribe() and wait. Not on the io thread.
  Outcomes subscribe(const std::string& channel);
  // Drops the subscription on every node (asynchronously), unless `keep` returns true on the io
  // thread just before: whoever asks can re-check there, in order with every subscribe(), that
  // nobody has wanted the channel again since it decided to drop it.
  void unsubscribe(const std::string& channel, std::function<bool()> keep = {});

  std::size_t size() const noexcept override { return nodes_.size(); }
  const net::NodeAddress& address(std::size_t i) const override { return nodes_[i]->address(); }
  std::uint64_t epoch(std::size_t i) const override { return nodes_[i]->epoch(); }
  bool closed_by_server(std::size_t i) override { return nodes_[i]->closed_by_server(); }
  std::chrono::milliseconds node_timeout() const noexcept { return node_timeout_; }
  // The io thread's context: timers of Tasks that run there.
  asio::io_context& io() noexcept { return io_; }

 private:
  // Declared first so it is destroyed last: the nodes' sockets and timers belong to it.
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  // Sends `calls` requests to every node on the io thread (now if called there, else posted),
  // each by `send(node, call, deadline, callback, shared)`, and calls `done` there with
  // [call][node] (a Done), or the one call's outcomes (a DoneOne), once all answered or enough
  // did. `shared` views call c of `kept`, kept with the round's own state for as long as a node
  // holds it (a retry after the round): one allocation for both (a Call in place would make
  // the round's state too large for malloc's per-thread cache: more instructions, not fewer).
  // A template: as a std::function, the sender cost an allocation per round (issue 32).
  template <typename Send>
  void gather(std::size_t calls, std::vector<Call> kept, Send send, Enough enough, Finish done);

  // Each connection enforces a round's deadline itself; a guard a second after it only keeps a
  // bug there from hanging the round (and every Task waiting behind it) for good. One timer for
  // every round, not one each (arming, cancelling and running a cancelled timer per round cost
  // more than a tenth of an asynchronous cycle, issue 32): every guard is the same time after
  // its round started, so the rounds wait for it in the order they started. The io thread's.
  // The queue holds its rounds, as each round's timer held it: a node that lost a round's
  // callback (the bug the guard is for) must not take the round with it. Finished rounds leave
  // from the front, so it holds at most the rounds started since the oldest open one.
  void guard(net::Clock::time_point at, std::shared_ptr<void> round);
  void arm_guard();
  void on_guard();
  struct Guarded {
    net::Clock::time_point at;
    std::shared_ptr<void> round;  // a Gathering (node_set.cc)
  };

  std::vector<std::unique_ptr<Node>> nodes_;
  const std::chrono::milliseconds node_timeout_;
  std::deque<Guarded> guarded_;  // by `at`
  asio::steady_timer guard_timer_{io_};
  bool guard_armed_ = false;
  std::thread thread_;
};

}  // namespace dlock::node

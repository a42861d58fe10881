// SPDX-License-Identifier: MIT
#include "node/node_set.h"

#include <condition_variable>
#include <mutex>
#include <optional>

#include "node/borrowed_run.h"

namespace dlock::node {
namespace {

// Where the io thread leaves each outcome for the waiting caller.
struct Gathering {
  Gathering(std::size_t calls, std::size_t nodes)
      : outcomes(calls, std::vector<std::optional<Result<resp::Reply>>>(nodes)),
        expected(calls * nodes) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<std::optional<Result<resp::Reply>>>> outcomes;  // guarded by mu
  std::size_t answered = 0;                                               // guarded by mu
  std::size_t yes = 0;       // answers that count towards Enough; guarded by mu
  bool caller_gone = false;  // the caller returned: Enough's predicate may dangle; guarded by mu
  const std::size_t expected;
};

}  // namespace

NodeSet::NodeSet(const std::vector<net::NodeAddress>& addresses, net::ConnectionOptions options,
                 std::chrono::milliseconds node_timeout, MessageHandler on_message)
    : work_(asio::make_work_guard(io_)), node_timeout_(node_timeout) {
  nodes_.reserve(addresses.size());
  for (const auto& a : addresses) {
    nodes_.push_back(std::make_unique<Node>(io_, a, options, on_message));
  }
  thread_ = std::thread([this] { io_.run(); });
}

NodeSet::~NodeSet() {
  work_.reset();
  io_.stop();
  thread_.join();
  nodes_.clear();
}

std::vector<Outcomes> NodeSet::run(const std::vector<Call>& calls, const Enough& enough) {
  if (auto done = run_borrowed(nodes_, calls, net::Clock::now() + node_timeout_, enough)) {
    return std::move(*done);
  }
  // The calls are captured by value: the io thread may still be sending after a caller gave
  // up waiting (which only a bug in a connection's deadline could cause).
  return gather(
      calls.size(),
      [calls](Node& node, std::size_t c, net::Clock::time_point deadline,
              net::Connection::Callback done) {
        const Call& call = calls[c];
        if (call.script != nullptr) {
          node.eval(*call.script, call.keys, call.args, deadline, std::move(done));
        } else {
          node.command(call.keys, deadline, std::move(done));
        }
      },
      enough);
}

Outcomes NodeSet::subscribe(const std::string& channel) {
  return std::move(gather(1, [channel](Node& node, std::size_t, net::Clock::time_point deadline,
                                       net::Connection::Callback done) {
    node.subscribe(channel, deadline, std::move(done));
  })[0]);
}

void NodeSet::unsubscribe(const std::string& channel, std::function<bool()> keep) {
  asio::post(io_, [this, channel, keep = std::move(keep)] {
    if (keep && keep()) return;
    for (auto& node : nodes_) node->unsubscribe(channel);
  });
}

std::vector<Outcomes> NodeSet::gather(std::size_t calls, Sender send, const Enough& enough) {
  auto g = std::make_shared<Gathering>(calls, nodes_.size());
  const auto deadline = net::Clock::now() + node_timeout_;
  const bool single = calls == 1;
  asio::post(io_, [this, g, deadline, calls, single, &enough, send = std::move(send)] {
    for (std::size_t c = 0; c < calls; ++c) {
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        send(*nodes_[i], c, deadline, [g, c, i, single, &enough](Result<resp::Reply> r) {
          std::lock_guard lock(g->mu);
          if (g->caller_gone) return;  // returned at quorum: `enough` may be gone too
          if (single && r && enough.needed > 0 && enough.counts(i, *r)) ++g->yes;
          g->outcomes[c][i] = std::move(r);
          if (++g->answered == g->expected || (single && enough.reached(g->yes))) {
            g->cv.notify_all();
          }
        });
      }
    }
  });

  std::unique_lock lock(g->mu);
  // Each connection enforces the deadline itself; the extra second only guards against a bug
  // there turning into a hang of the caller.
  g->cv.wait_until(lock, deadline + std::chrono::seconds(1), [&] {
    return g->answered == g->expected || (single && enough.reached(g->yes));
  });
  g->caller_gone = true;
  const bool quorum_return = single && enough.reached(g->yes) && g->answered < g->expected;
  std::vector<Outcomes> out(calls);
  for (std::size_t c = 0; c < calls; ++c) {
    out[c].reserve(nodes_.size());
    for (auto& o : g->outcomes[c]) {
      if (o) {
        out[c].push_back(std::move(*o));
      } else if (quorum_return) {
        out[c].push_back(Error(errc::cancelled, "not waited for: a quorum had answered"));
      } else {
        out[c].push_back(Error(errc::timeout, "no answer"));
      }
    }
  }
  return out;
}

}  // namespace dlock::node

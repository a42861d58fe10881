// SPDX-License-Identifier: MIT
#include "node/node_set.h"

#include <condition_variable>
#include <mutex>
#include <optional>

#include "engine/background_thread.h"
#include "engine/thread_role.h"
#include "node/borrowed_run.h"
#include "node/round_outcomes.h"

namespace dlock::node {
namespace {

// One round on the io thread: each outcome as it comes, until all or enough are in.
struct Gathering {
  Gathering(std::size_t calls, std::vector<Call> kept_calls, std::size_t nodes, Enough enough,
            NodeSet::Finish finished_with)
      : kept(std::move(kept_calls)),
        round(calls, nodes, std::move(enough)),
        done(std::move(finished_with)) {}
  const std::vector<Call> kept;  // the calls a round sends (NodeSet::start), else empty
  RoundOutcomes round;
  NodeSet::Finish done;

  void add(std::size_t c, std::size_t i, Result<resp::Reply> r) {
    if (round.taken()) return;  // after a return at quorum the rest are read and dropped
    round.add(c, i, std::move(r));
    if (round.complete()) finish(false);
  }
  // `guarded`: the guard (NodeSet::on_guard) ended the round; the missing answers timed out.
  void finish(bool guarded) {
    if (auto* one = std::get_if<Fanout::DoneOne>(&done)) {
      auto out = round.take_one(!guarded);
      auto d = std::move(*one);
      return d(std::move(out));
    }
    auto out = round.take(!guarded);
    auto d = std::move(std::get<Fanout::Done>(done));
    d(std::move(out));
  }
};

}  // namespace

NodeSet::NodeSet(const std::vector<net::NodeAddress>& addresses, net::ConnectionOptions options,
                 std::chrono::milliseconds node_timeout, MessageHandler on_message,
                 Observer* observer)
    : work_(asio::make_work_guard(io_)), node_timeout_(node_timeout) {
  nodes_.reserve(addresses.size());
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    nodes_.push_back(make_node(io_, addresses[i], options, on_message, i, observer));
  }
  thread_ = engine::background_thread([this] {
    engine::become_io_thread(io_);
    io_.run();
  });
}

NodeSet::~NodeSet() {
  work_.reset();
  io_.stop();
  thread_.join();
  nodes_.clear();
}

void NodeSet::start(std::vector<Call> calls, Enough enough, Done done) {
  if (!engine::on_io_thread()) {
    if (auto out = run_borrowed(nodes_, calls, net::Clock::now() + node_timeout_, enough)) {
      return done(std::move(*out));
    }
  }
  // Shared: a retry (NOSCRIPT, a redirect) may be sent after the round, and a reply it stops
  // waiting for reaches it later, from whoever reads it.
  const std::size_t n = calls.size();
  gather(
      n, std::move(calls),
      [](Node& node, net::Clock::time_point deadline, net::Connection::Callback sent,
         std::shared_ptr<const Call> shared) {
        node.run(std::move(shared), deadline, std::move(sent));
      },
      std::move(enough), std::move(done));
}

void NodeSet::start_one(Call call, Enough enough, DoneOne done) {
  if (!engine::on_io_thread()) {
    if (auto out = run_borrowed(nodes_, call, net::Clock::now() + node_timeout_, enough)) {
      return done(std::move(*out));
    }
  }
  std::vector<Call> calls;
  calls.push_back(std::move(call));
  gather(
      1, std::move(calls),
      [](Node& node, net::Clock::time_point deadline, net::Connection::Callback sent,
         std::shared_ptr<const Call> shared) {
        node.run(std::move(shared), deadline, std::move(sent));
      },
      std::move(enough), std::move(done));
}

void NodeSet::subscribe(const std::string& channel, Done done) {
  gather(
      1, std::vector<Call>{},
      [channel](Node& node, net::Clock::time_point deadline, net::Connection::Callback sent,
                const std::shared_ptr<const Call>&) {
        node.subscribe(channel, deadline, std::move(sent));
      },
      {}, std::move(done));
}

Outcomes NodeSet::subscribe(const std::string& channel) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Outcomes> out;
  };
  auto shared = std::make_shared<Shared>();
  subscribe(channel, [shared](std::vector<Outcomes> o) {
    std::lock_guard lock(shared->mu);
    shared->out.emplace(std::move(o[0]));
    shared->cv.notify_one();
  });
  std::unique_lock lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->out.has_value(); });
  return std::move(*shared->out);
}

void NodeSet::unsubscribe(const std::string& channel, std::function<bool()> keep) {
  asio::post(io_, [this, channel, keep = std::move(keep)] {
    if (keep && keep()) return;
    for (auto& node : nodes_) node->unsubscribe(channel);
  });
}

template <typename Send>
void NodeSet::gather(std::size_t calls, std::vector<Call> kept, Send send, Enough enough,
                     Finish done) {
  auto g = std::make_shared<Gathering>(calls, std::move(kept), nodes_.size(), std::move(enough),
                                       std::move(done));
  auto go = [this, g, calls, send = std::move(send)] {
    // Each connection enforces the deadline itself and calls back exactly once.
    const auto deadline = net::Clock::now() + node_timeout_;
    guard(deadline + std::chrono::seconds(1), g);
    for (std::size_t c = 0; c < calls; ++c) {
      const std::shared_ptr<const Call> shared =
          g->kept.empty() ? nullptr : std::shared_ptr<const Call>(g, &g->kept[c]);
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        send(
            *nodes_[i], deadline, [g, c, i](Result<resp::Reply> r) { g->add(c, i, std::move(r)); },
            shared);
      }
    }
  };
  if (io_.get_executor().running_in_this_thread()) {
    go();
  } else {
    asio::post(io_, std::move(go));
  }
}

namespace {

// An open round of the guard's queue: null once it finished.
Gathering* open_round(const std::shared_ptr<void>& round) {
  auto* g = static_cast<Gathering*>(round.get());
  return g->round.taken() ? nullptr : g;
}

}  // namespace

void NodeSet::guard(net::Clock::time_point at, std::shared_ptr<void> round) {
  // Rounds finish about in the order they started: those done at the front go now, so that
  // the queue holds about the rounds in flight.
  while (!guarded_.empty() && open_round(guarded_.front().round) == nullptr) guarded_.pop_front();
  guarded_.push_back(Guarded{at, std::move(round)});
  arm_guard();
}

void NodeSet::arm_guard() {
  if (guard_armed_ || guarded_.empty()) return;  // armed for the front, not later than the rest
  guard_armed_ = true;
  guard_timer_.expires_at(guarded_.front().at);
  guard_timer_.async_wait([this](const asio::error_code& ec) {
    if (!ec) on_guard();
  });
}

void NodeSet::on_guard() {
  guard_armed_ = false;
  const auto now = net::Clock::now();
  while (!guarded_.empty()) {
    auto* g = open_round(guarded_.front().round);
    if (g != nullptr && guarded_.front().at > now) break;
    auto held = std::move(guarded_.front().round);
    guarded_.pop_front();
    // The missing answers timed out. May start rounds, which join the back of the queue.
    if (g != nullptr) g->finish(true);
  }
  arm_guard();
}

}  // namespace dlock::node

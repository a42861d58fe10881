// SPDX-License-Identifier: MIT
#include "node/node_set.h"

#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>

namespace dlock::node {
namespace {

// Where the io thread leaves each node's outcome for the waiting caller.
struct Gathering {
  explicit Gathering(std::size_t n) : outcomes(n) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<Result<resp::Reply>>> outcomes;  // guarded by mu
  std::size_t answered = 0;                                  // guarded by mu
};

}  // namespace

NodeSet::NodeSet(const std::vector<net::NodeAddress>& addresses, net::ConnectionOptions options,
                 std::chrono::milliseconds node_timeout)
    : work_(asio::make_work_guard(io_)), node_timeout_(node_timeout) {
  nodes_.reserve(addresses.size());
  for (const auto& a : addresses) nodes_.push_back(std::make_unique<Node>(io_, a, options));
  thread_ = std::thread([this] { io_.run(); });
}

NodeSet::~NodeSet() {
  work_.reset();
  io_.stop();
  thread_.join();
  nodes_.clear();
}

Outcomes NodeSet::run_script(const scripts::Script& script, const std::vector<std::string>& keys,
                             const std::vector<std::string>& args) {
  return gather([&script, &keys, &args](Node& n, net::Clock::time_point deadline,
                                        net::Connection::Callback done) {
    n.eval(script, keys, args, deadline, std::move(done));
  });
}

Outcomes NodeSet::run_command(const std::vector<std::string>& args) {
  return gather([&args](Node& n, net::Clock::time_point deadline, net::Connection::Callback done) {
    n.command(args, deadline, std::move(done));
  });
}

Outcomes NodeSet::gather(Sender send) {
  auto g = std::make_shared<Gathering>(nodes_.size());
  const auto deadline = net::Clock::now() + node_timeout_;
  // `send` refers to the caller's arguments; it runs on the io thread before we return,
  // because we wait below for every node to answer (or for the safety margin to pass).
  auto started = std::make_shared<std::promise<void>>();
  auto started_future = started->get_future();
  asio::post(io_, [this, g, deadline, &send, started] {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      send(*nodes_[i], deadline, [g, i](Result<resp::Reply> r) {
        std::lock_guard lock(g->mu);
        g->outcomes[i] = std::move(r);
        ++g->answered;
        g->cv.notify_all();
      });
    }
    started->set_value();
  });
  started_future.wait();

  std::unique_lock lock(g->mu);
  // Each connection enforces the deadline itself; the extra second only guards against a bug
  // there turning into a hang of the caller.
  g->cv.wait_until(lock, deadline + std::chrono::seconds(1),
                   [&] { return g->answered == nodes_.size(); });
  Outcomes out;
  out.reserve(nodes_.size());
  for (auto& o : g->outcomes) {
    out.push_back(o ? std::move(*o) : Result<resp::Reply>(Error(errc::timeout, "no answer")));
  }
  return out;
}

}  // namespace dlock::node

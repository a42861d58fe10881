// SPDX-License-Identifier: MIT
#include "node/node_set.h"

#include <condition_variable>
#include <mutex>
#include <optional>

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
  const std::size_t expected;
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

Outcomes NodeSet::run_script(const scripts::Script& script, std::vector<std::string> keys,
                             std::vector<std::string> args) {
  return std::move(run({Call{&script, std::move(keys), std::move(args)}})[0]);
}

Outcomes NodeSet::run_command(std::vector<std::string> args) {
  return std::move(run({Call{nullptr, std::move(args), {}}})[0]);
}

std::vector<Outcomes> NodeSet::run(const std::vector<Call>& calls) {
  auto g = std::make_shared<Gathering>(calls.size(), nodes_.size());
  const auto deadline = net::Clock::now() + node_timeout_;
  // The calls are copied into the posted work: the io thread may still be sending after a
  // caller gave up waiting (which only a bug in a connection's deadline could cause).
  asio::post(io_, [this, g, deadline, calls] {
    for (std::size_t c = 0; c < calls.size(); ++c) {
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        auto done = [g, c, i](Result<resp::Reply> r) {
          std::lock_guard lock(g->mu);
          g->outcomes[c][i] = std::move(r);
          if (++g->answered == g->expected) g->cv.notify_all();
        };
        const Call& call = calls[c];
        if (call.script != nullptr) {
          nodes_[i]->eval(*call.script, call.keys, call.args, deadline, std::move(done));
        } else {
          nodes_[i]->command(call.keys, deadline, std::move(done));
        }
      }
    }
  });

  std::unique_lock lock(g->mu);
  // Each connection enforces the deadline itself; the extra second only guards against a bug
  // there turning into a hang of the caller.
  g->cv.wait_until(lock, deadline + std::chrono::seconds(1),
                   [&] { return g->answered == g->expected; });
  std::vector<Outcomes> out(calls.size());
  for (std::size_t c = 0; c < calls.size(); ++c) {
    out[c].reserve(nodes_.size());
    for (auto& o : g->outcomes[c]) {
      out[c].push_back(o ? std::move(*o) : Result<resp::Reply>(Error(errc::timeout, "no answer")));
    }
  }
  return out;
}

}  // namespace dlock::node

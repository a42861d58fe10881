// SPDX-License-Identifier: MIT
// Fanout: what the lock algorithms need of N nodes: send calls to all of them at once and get
// one outcome per node. NodeSet is the real one; tests put a simulated one underneath
// QuorumLock and Membership to drive the quorum logic through adversarial schedules (lost
// replies, calls never sent, restarts) without sockets.
//
// A round is started, and finishes by calling back (start()); Tasks await it as a Round. run()
// waits for it, for callers outside the engine's Tasks.
#pragma once

#include <dlock/result.h>

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net/node_address.h"
#include "node/call.h"
#include "resp/reply.h"

namespace dlock::node {

using Outcomes = std::vector<Result<resp::Reply>>;  // one per node, in node order

class Fanout {
 public:
  using Done = std::function<void(std::vector<Outcomes>)>;
  using DoneOne = std::function<void(Outcomes)>;
  virtual ~Fanout() = default;

  // Sends every call to every node, pipelined, under one deadline; `done` then runs once with
  // [call][node]. `enough` applies to a single call only. `done` runs either inline, before
  // start() returns, on the calling thread (a round done there on borrowed sockets; or, on the
  // io thread, a round whose every request failed at once), or later on the io thread.
  virtual void start(std::vector<Call> calls, Enough enough, Done done) = 0;
  // start() for one call, its outcomes alone: every round of a lock cycle is one call, and
  // NodeSet then makes neither a vector of calls nor one of outcomes (issue 32). Here, for
  // fanouts without a way of their own: through start().
  virtual void start_one(Call call, Enough enough, DoneOne done) {
    std::vector<Call> calls;
    calls.push_back(std::move(call));
    start(std::move(calls), std::move(enough),
          [done = std::move(done)](std::vector<Outcomes> out) { done(std::move(out[0])); });
  }
  // Runs `f` on the io thread, later (a simulation may run it at once).
  virtual void post(std::function<void()> f) = 0;
  virtual std::size_t size() const noexcept = 0;
  virtual const net::NodeAddress& address(std::size_t i) const = 0;
  // Changes whenever node i's connection is replaced: replies on different epochs may come
  // from different server processes.
  virtual std::uint64_t epoch(std::size_t i) const = 0;
  // True if the server closed node i's idle connection (Node::closed_by_server): its next
  // request reconnects, on a new epoch. Any thread.
  virtual bool closed_by_server(std::size_t) { return false; }

  // N/2 + 1: any two quorums share at least one node.
  std::size_t quorum() const noexcept { return size() / 2 + 1; }

  // start() and wait. Not on an io thread.
  std::vector<Outcomes> run(std::vector<Call> calls, Enough enough = {}) {
    struct Shared {
      std::mutex mu;
      std::condition_variable cv;
      std::optional<std::vector<Outcomes>> out;
    };
    auto shared = std::make_shared<Shared>();
    start(std::move(calls), std::move(enough), [shared](std::vector<Outcomes> out) {
      std::lock_guard lock(shared->mu);
      shared->out.emplace(std::move(out));
      shared->cv.notify_one();
    });
    std::unique_lock lock(shared->mu);
    shared->cv.wait(lock, [&] { return shared->out.has_value(); });
    return std::move(*shared->out);
  }
  Outcomes run_script(const scripts::Script& script, Strings keys, Strings args,
                      Enough enough = {}) {
    std::vector<Call> calls;
    calls.push_back(Call{&script, std::move(keys), std::move(args)});
    return std::move(run(std::move(calls), std::move(enough))[0]);
  }
  Outcomes run_command(Strings args) {
    std::vector<Call> calls;
    calls.push_back(Call{nullptr, std::move(args), {}});
    return std::move(run(std::move(calls))[0]);
  }
};

// The awaitable protocol of a round: `begin(done)` starts it; the Task goes on on the thread
// that finished it (the calling thread if it was done inline, without suspending). `Out`: what
// the round ends with ([call][node], or one call's outcomes).
template <typename Derived, typename Out = std::vector<Outcomes>>
class RoundAwaiter {
 public:
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> h) {
    h_ = h;
    static_cast<Derived*>(this)->begin([this](Out out) {
      out_ = std::move(out);
      // Whoever comes second goes on: the round finishing after the suspension resumes the
      // Task; a round finished inline lets await_suspend return false (no suspension).
      if (finished_.exchange(true, std::memory_order_acq_rel)) h_.resume();
    });
    return !finished_.exchange(true, std::memory_order_acq_rel);
  }
  Out await_resume() { return std::move(out_); }

 private:
  std::coroutine_handle<> h_;
  Out out_;
  std::atomic<bool> finished_{false};
};

// co_await Round(fanout, calls, enough) -> [call][node]: a round inside a Task.
class Round : public RoundAwaiter<Round> {
 public:
  Round(Fanout& fanout, std::vector<Call> calls, Enough enough = {})
      : fanout_(fanout), calls_(std::move(calls)), enough_(std::move(enough)) {}
  void begin(Fanout::Done done) {
    fanout_.start(std::move(calls_), std::move(enough_), std::move(done));
  }

 private:
  Fanout& fanout_;
  std::vector<Call> calls_;
  Enough enough_;
};

// co_await ScriptRound(fanout, script, keys, args, enough) -> one outcome per node: a round of
// one call (Fanout::start_one).
class ScriptRound : public RoundAwaiter<ScriptRound, Outcomes> {
 public:
  ScriptRound(Fanout& fanout, const scripts::Script& script, Strings keys, Strings args,
              Enough enough = {})
      : ScriptRound(fanout, Call{&script, std::move(keys), std::move(args)}, std::move(enough)) {}
  ScriptRound(Fanout& fanout, Call call, Enough enough = {})
      : fanout_(fanout), call_(std::move(call)), enough_(std::move(enough)) {}
  // A plain command (args[0] is its name).
  ScriptRound(Fanout& fanout, Strings command)
      : ScriptRound(fanout, Call{nullptr, std::move(command), {}}) {}
  void begin(Fanout::DoneOne done) {
    fanout_.start_one(std::move(call_), std::move(enough_), std::move(done));
  }

 private:
  Fanout& fanout_;
  Call call_;
  Enough enough_;
};

}  // namespace dlock::node

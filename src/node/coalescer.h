// SPDX-License-Identifier: MIT
// Coalescer: group commit on one server (docs/protocol.md, "Group commit"). Calls with a batch
// form (node::BatchForm) run on the io thread are held until the handlers queued there before
// them have run (one asio::post), so that the calls many callers start at once are sent as one
// batch call per batch script instead of one script call each: the server's per-call and
// per-node work (EVALSHA, the fencing counter, the max-ttl record) is then paid once for them
// all (issue 32).
//
// Each call still gets exactly the reply its own script would have given: the batch reply's
// element for it, or, where the element is nil ("nothing changed here"), the reply of the call
// itself, sent then under its own deadline. A batch call that fails (a timeout, a lost
// connection) or is answered an error of the server's (the replica guard's REPLICAS, BUSY,
// LOADING, READONLY, MASTERDOWN, OOM) gives every call in it that failure or error; answered
// any other error (which may be one call's: NOPERM for one key), each call is sent alone, as
// for nil. A batch call's deadline is the earliest of its calls' deadlines.
//
// Io thread only. The callbacks follow net::Connection::Callback's rules: each runs once, never
// inside add().
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "net/connection.h"
#include "node/call.h"

namespace dlock::node {

class Coalescer {
 public:
  // How the owner sends a call (a single one, or a batch call) on its connection.
  using Send = std::function<void(std::shared_ptr<const Call>, net::Clock::time_point,
                                  net::Connection::Callback)>;
  // Calls per batch call at most: bounds how long one call blocks the server, and the size of a
  // request (the prototypes measured 16 and 64: docs/protocol-lean.md).
  static constexpr std::size_t kMaxItems = 64;

  Coalescer(asio::io_context& io, Send send) : io_(io), send_(std::move(send)) {}

  // True on the thread that may call add() (the io thread).
  bool here() const { return io_.get_executor().running_in_this_thread(); }
  // Holds `call` (which has a batch form) for the next flush.
  void add(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
           net::Connection::Callback done);

 private:
  struct Item {
    std::shared_ptr<const Call> call;
    net::Clock::time_point deadline;
    net::Connection::Callback done;
  };
  // Sends what is held: per batch script (and replica guard), in order of arrival, batches of
  // up to kMaxItems; a batch of one as the call itself.
  void flush();
  void send_batch(std::vector<Item> items);
  // The batch reply (or failure) handed to every item of `items`.
  void answer(std::vector<Item>& items, Result<resp::Reply> r);

  asio::io_context& io_;
  const Send send_;
  std::vector<Item> pending_;
  bool armed_ = false;  // a flush is posted
};

}  // namespace dlock::node

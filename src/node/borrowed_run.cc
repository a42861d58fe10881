// SPDX-License-Identifier: MIT
#include "node/borrowed_run.h"

#include <poll.h>

#include <cerrno>
#include <deque>

namespace dlock::node {
namespace {

using Outcome = std::optional<Result<resp::Reply>>;

std::string millis(net::Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

// One node's side of the exchange.
struct Lane {
  net::Connection* connection = nullptr;
  struct Expected {
    std::size_t call;
    bool full_source;  // the EVAL sent after a NOSCRIPT
  };
  std::deque<Expected> expected;  // replies due, in the order the requests were written
  std::optional<net::Connection::Failure> failure;

  // The socket broke: every call still due gets the error.
  void break_with(const Error& e, std::vector<std::vector<Outcome>>& out, std::size_t node) {
    failure = net::Connection::Failure{static_cast<errc>(e.code().value()), e.summary()};
    for (const auto& x : expected) out[x.call][node] = Result<resp::Reply>(e);
    expected.clear();
  }
};

}  // namespace

std::optional<std::vector<std::vector<Result<resp::Reply>>>> run_borrowed(
    const std::vector<std::unique_ptr<Node>>& nodes, const std::vector<Call>& calls,
    net::Clock::time_point deadline, const Enough& enough) {
  const std::size_t n = nodes.size();
  std::vector<Lane> lanes(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!nodes[i]->connection().try_borrow()) {
      for (std::size_t j = 0; j < i; ++j) lanes[j].connection->give_back(std::nullopt, false);
      return std::nullopt;
    }
    lanes[i].connection = &nodes[i]->connection();
  }
  const auto sent = net::Clock::now();

  std::vector<std::vector<Outcome>> out(calls.size(), std::vector<Outcome>(n));
  // Pipelined, in chunks of about 64 KiB: a renewal round of 100,000 locks is megabytes, and
  // building it whole would only raise the peak memory.
  constexpr std::size_t kChunk = 64 * 1024;
  std::string bytes;
  for (std::size_t i = 0; i < n; ++i) {
    Error e;
    bool ok = true;
    bytes.clear();
    for (std::size_t c = 0; c < calls.size() && ok; ++c) {
      bytes += Node::encode(calls[c], false);
      lanes[i].expected.push_back({c, false});
      if (bytes.size() >= kChunk || c + 1 == calls.size()) {
        ok = lanes[i].connection->borrowed_write(bytes, deadline, e);
        bytes.clear();
      }
    }
    if (!ok) {
      for (std::size_t c = lanes[i].expected.size(); c < calls.size(); ++c) {
        lanes[i].expected.push_back({c, false});  // never sent: they fail the same way
      }
      lanes[i].break_with(e, out, i);
    }
  }

  const bool single = calls.size() == 1;
  std::size_t yes = 0;
  std::vector<pollfd> fds;
  std::vector<std::size_t> fd_lane;
  while (!(single && enough.reached(yes))) {
    fds.clear();
    fd_lane.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (lanes[i].expected.empty()) continue;
      fds.push_back(pollfd{lanes[i].connection->borrowed_fd(), POLLIN, 0});
      fd_lane.push_back(i);
    }
    if (fds.empty()) break;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - net::Clock::now());
    if (left.count() <= 0) break;
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) break;
    for (std::size_t k = 0; k < fds.size() && ready > 0; ++k) {
      if (fds[k].revents == 0) continue;
      const std::size_t i = fd_lane[k];
      Lane& lane = lanes[i];
      net::Connection& conn = *lane.connection;
      Error e;
      if (!conn.borrowed_read(e)) {
        lane.break_with(e, out, i);
        continue;
      }
      resp::Reader& reader = conn.borrowed_reader();
      while (auto reply = reader.next()) {
        if (conn.borrowed_owed() > 0) {
          --conn.borrowed_owed();  // the reply to a request an earlier caller stopped waiting for
          continue;
        }
        if (lane.expected.empty()) {
          lane.break_with(Error(errc::protocol_error, "reply to no request"), out, i);
          break;
        }
        const auto x = lane.expected.front();
        lane.expected.pop_front();
        const Call& call = calls[x.call];
        if (call.script != nullptr && !x.full_source && reply->is_error_code("NOSCRIPT")) {
          // A restarted or flushed server lost its script cache: send the source once.
          lane.expected.push_back({x.call, true});
          if (!conn.borrowed_write(Node::encode(call, true), deadline, e)) {
            lane.break_with(e, out, i);
            break;
          }
          continue;
        }
        if (single && enough.needed > 0 && enough.counts(i, *reply)) ++yes;
        out[x.call][i] = std::move(*reply);
      }
      if (!lane.failure && !reader.error().empty()) {
        lane.break_with(Error(errc::protocol_error, "malformed reply: " + reader.error()), out, i);
      }
    }
  }

  const bool quorum_return = single && enough.reached(yes);
  for (std::size_t i = 0; i < n; ++i) {
    Lane& lane = lanes[i];
    const bool late = !lane.expected.empty() && !quorum_return;
    for (const auto& x : lane.expected) {
      out[x.call][i] =
          quorum_return
              ? Result<resp::Reply>(Error(errc::cancelled, "not waited for: a quorum had answered"))
              : Result<resp::Reply>(
                    Error(errc::timeout, "no reply within " + millis(deadline - sent)));
    }
    lane.connection->borrowed_owed() += lane.expected.size();
    lane.connection->give_back(std::move(lane.failure), late);
  }

  std::vector<std::vector<Result<resp::Reply>>> result(calls.size());
  for (std::size_t c = 0; c < calls.size(); ++c) {
    result[c].reserve(n);
    for (auto& o : out[c]) {
      result[c].push_back(o ? std::move(*o)
                            : Result<resp::Reply>(Error(errc::timeout, "no answer")));
    }
  }
  return result;
}

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
// Connection: one pipelined connection to one Redis node, driven by an asio io_context.
//
// Requests are written back to back and matched to replies in order. Every request has its own
// deadline: when it passes, the caller gets errc::timeout and the late reply, if it ever comes,
// is dropped. The connection is made on first use (TCP, then TLS, then AUTH and SELECT) and
// remade after a failure, but not before a backoff delay that doubles with each failure; a
// request arriving during the backoff fails at once with the last error, so a dead node costs
// a caller nothing. A connection whose server stops answering for stall_timeout is dropped.
//
// Thread-safety: none. Every member function must run on the io_context's (single) thread,
// and callbacks run there too.
#pragma once

#include <dlock/result.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "net/node_address.h"
#include "resp/reader.h"
#include "resp/reply.h"

namespace dlock::net {

using Clock = std::chrono::steady_clock;

struct ConnectionOptions {
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds backoff_min{50};
  std::chrono::milliseconds backoff_max{2000};
  std::chrono::milliseconds stall_timeout{5000};
  asio::ssl::context* tls_context = nullptr;  // required for rediss:// addresses
};

class Connection {
 public:
  using Callback = std::function<void(Result<resp::Reply>)>;

  Connection(asio::io_context& io, NodeAddress address, ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends one RESP-encoded command and calls `done` exactly once: with the reply (which may be
  // an error reply), or with an Error (io_error, timeout, auth_error, protocol_error). `done`
  // never runs inside send() itself.
  void send(std::string command, Clock::time_point deadline, Callback done);

  // For a subscriber connection: `on_message` gets every pub/sub message pushed by the server
  // (["message", channel, payload]), and `on_ready` runs after each (re)connection so the
  // owner can subscribe again (a new connection has no subscriptions). Set before first use.
  void set_push_handlers(std::function<void(const resp::Reply&)> on_message,
                         std::function<void()> on_ready) {
    on_message_ = std::move(on_message);
    on_ready_ = std::move(on_ready);
  }

  const NodeAddress& address() const noexcept { return address_; }
  // How many times a connection was established (handshake done). A change tells that the
  // server may be a new process: see lock/membership.h. Readable from any thread.
  std::uint64_t epoch() const noexcept { return epoch_.load(std::memory_order_acquire); }

 private:
  enum class State { idle, connecting, ready };
  struct Pending {
    std::string command;  // empty once written
    Clock::time_point deadline;
    Clock::time_point sent;
    Callback done;  // empty once answered or timed out
  };
  class Stream;

  void start_connect();
  void on_connected();
  void send_handshake();
  void become_ready();
  void fail(errc code, const std::string& reason);
  void flush();
  void start_read();
  void on_read(std::size_t n);
  void arm_timer(Clock::time_point when);
  void on_timer();
  void post_error(Callback done, errc code, std::string reason);
  Error error(errc code, const std::string& reason) const;

  asio::io_context& io_;
  const NodeAddress address_;
  const ConnectionOptions options_;

  State state_ = State::idle;
  std::uint64_t generation_ = 0;  // bumped on every (re)connect: stale handlers check it
  std::shared_ptr<Stream> stream_;
  asio::ip::tcp::resolver resolver_;
  asio::steady_timer timer_;
  Clock::time_point timer_at_ = Clock::time_point::max();
  Clock::time_point connect_deadline_ = Clock::time_point::max();

  std::deque<Pending> waiting_;    // not yet written: the connection is not ready
  std::deque<Pending> in_flight_;  // written, reply not yet read (oldest first)
  std::size_t handshake_left_ = 0;
  std::string out_;  // encoded commands not yet handed to the socket
  bool write_busy_ = false;
  bool writable_ = false;  // the stream is open (TLS done): handshake commands may be written
  std::unique_ptr<resp::Reader> reader_;
  std::array<char, 16384> read_buf_{};
  Clock::time_point last_read_{};

  std::atomic<std::uint64_t> epoch_{0};
  std::function<void(const resp::Reply&)> on_message_;
  std::function<void()> on_ready_;
  std::string last_error_;
  errc last_code_ = errc::io_error;
  Clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
};

}  // namespace dlock::net

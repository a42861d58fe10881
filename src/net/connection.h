// SPDX-License-Identifier: MIT
// Connection: one pipelined connection to one Redis node, driven by an asio io_context.
//
// Requests are written back to back and matched to replies in order. Every request has its own
// deadline: when it passes, the caller gets errc::timeout and the late reply, if it ever comes,
// is dropped. The connection is made on first use (TCP, then TLS, then AUTH and SELECT) and
// remade after a failure: at once if it had answered something other than an error, else after
// a backoff delay that doubles with each failure. A request arriving during the backoff fails
// at once with the last error, so a dead node costs a caller nothing (a subscriber asks to
// reconnect by itself: set_keep_connected). A connection whose server stops answering for
// stall_timeout is dropped.
//
// The fast path: a caller thread may borrow an idle connection (ready, plain TCP, nothing
// queued, written or being read, not a subscriber) and do its requests on the socket itself,
// which saves the two thread hand-offs per round trip that send() costs (caller -> io thread
// -> caller). While the socket is lent the io thread does not touch it: requests sent then
// wait in `waiting_` until it comes back. Replies the borrower did not wait for (it returned
// at a quorum) are `owed`: the next borrower reads and drops them first, or, when the io
// thread takes the socket back, they become in-flight requests nobody waits for.
//
// Thread-safety: try_borrow() may be called from any thread, and the borrowed_* functions and
// give_back() from the borrowing thread while it holds the loan. Everything else must run on
// the io_context's (single) thread, and callbacks run there too.
#pragma once

#include <dlock/result.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
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

  // Whether to reconnect on its own after a failure (after the backoff), instead of on the
  // next send(). A subscriber with subscriptions needs it: nothing else would be sent on it,
  // and while it is down its waiters hear of no release. Io thread only.
  void set_keep_connected(bool keep);

  // Takes the socket for the calling thread if the connection is idle; false otherwise (use
  // send() then). Any thread but the io thread.
  bool try_borrow();
  // While borrowed: writes all of `bytes` (false on error or deadline, with `error` set).
  bool borrowed_write(std::string_view bytes, Clock::time_point deadline, Error& error);
  int borrowed_fd() const;
  resp::Reader& borrowed_reader() { return *reader_; }
  std::size_t& borrowed_owed() { return owed_; }
  // While borrowed: reads what the socket has into borrowed_reader(). False when the server
  // closed the connection or the read failed, with `error` set.
  bool borrowed_read(Error& error);
  // Ends the loan. `failure`: the socket broke (I/O or protocol error); the io thread drops
  // the connection with that reason. `late`: some owed replies passed their deadline; the io
  // thread reads them from now on, so a server that stopped answering is noticed. Otherwise
  // owed replies stay for the next borrower.
  struct Failure {
    errc code;
    std::string reason;
  };
  void give_back(std::optional<Failure> failure, bool late);

  // For a command connection: runs after each (re)connection (Node loads its scripts there).
  void set_on_ready(std::function<void()> on_ready) { on_ready_ = std::move(on_ready); }

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
  void ensure_reading();
  void absorb_owed();
  void resume_after_loan(std::optional<Failure> failure);
  void drain_waiting();
  void update_lendable();
  // Plain command connections read only while replies are due; TLS and subscriber ones always.
  bool reads_always() const { return address_.tls || static_cast<bool>(on_message_); }
  // An idle socket with something to read (or a hang-up) means the server closed it.
  bool peer_closed() const;
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

  bool reading_ = false;  // a read is outstanding on the stream
  std::size_t owed_ = 0;  // replies to read and drop (see the fast path above)

  // The loan, guarded by lend_mu_. lendable_ is kept by the io thread; lent_ by the borrower.
  std::mutex lend_mu_;
  bool lendable_ = false;
  bool lent_ = false;
  bool deferred_ = false;  // send() queued a request while the socket was lent
  int lent_fd_ = -1;       // the socket, taken out of asio's reactor for the loan
  bool lent_v6_ = false;

  std::atomic<std::uint64_t> epoch_{0};
  std::function<void(const resp::Reply&)> on_message_;
  std::function<void()> on_ready_;
  std::string last_error_;
  errc last_code_ = errc::io_error;
  Clock::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
  bool keep_connected_ = false;
  bool answered_ = false;  // this connection got a reply that was not an error
};

}  // namespace dlock::net

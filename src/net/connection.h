// SPDX-License-Identifier: MIT
// Connection: one pipelined connection to one Redis node, driven by an asio io_context.
//
// Requests are written back to back and matched to replies in order. Every request has its own
// deadline: when it passes, the caller gets errc::timeout and the late reply, if it ever comes,
// is dropped.
//
// A reply names no request, so one reply lost on a connection that stays open (TCP never loses
// one; a proxy between client and server may) would shift every reply after it onto the
// request before its own: a lock acquisition could read another's grant. So a reply goes to its
// request only when it cannot be another's: at once when nothing was written after that request
// (one request at a time costs nothing), else once the marker written after it came back in
// its place. A marker is a PING with a text of its own (a random number per connection object,
// and a count) that ends every write that holds a request queued behind an unanswered one
// (pipelined, or behind a request nobody waits for any more): the server answers it with the
// replies of that write, so holding them costs no time. The io thread also ends with one every
// write that holds a request while requests overlap (one queued behind an unanswered one in the
// last 64 writes): a marker written later would come back only after the server ran that later
// write too. A lone request's write has none otherwise (a reply read before anything else was
// written is its own); if another write follows before that reply is read, the reply waits for
// that write's marker. A WAIT (which the server may hold) gets a marker before it too. BUSY
// and LOADING replies are not held (the server ran nothing: handed to the wrong request, they
// only fail it) unless a reply before them is. A marker's reply anywhere else, or anything but
// a marker's, BUSY or LOADING in a marker's place, means a reply was lost: the connection fails
// (protocol_error) with every request whose reply it can no longer tell, and is made again.
// BUSY or LOADING in a marker's place proves nothing: the replies held before it wait for the
// next marker.
// An ASKING is written together with the command after it (nothing between them: the server
// applies ASKING to the next command only). docs/protocol.md has the argument.
//
// One state machine, two drivers. Every request, whoever sends it, is a Pending entry in one
// queue (waiting_ until the connection is ready, then in_flight_ until its reply), and replies
// are matched to entries in order by one function (dispatch). Usually the io thread drives the
// socket through asio. A caller thread may instead borrow an idle connection (ready, plain TCP,
// nobody waiting for a reply, nothing queued or being written or read, not a subscriber) and
// drive the socket itself with poll(), which saves the two thread hand-offs per round trip that
// the io thread costs (caller -> io thread -> caller). While the socket is lent the io thread
// does not touch the socket or in_flight_: send() from the io thread then queues in waiting_
// until give_back(). A request the borrower stops waiting for (it returned at a quorum) stays
// in in_flight_ with nobody to call back, as a timed-out request does on the io thread: the
// next driver reads its reply and drops it.
//
// Thread-safety: try_borrow() may be called from any thread but the io thread, send() and the
// borrowed_* functions and give_back() from the borrowing thread while it holds the loan.
// Everything else (and send() otherwise) must run on the io_context's (single) thread.
// Callbacks run on the thread that drives the socket when the reply (or failure) comes.
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
#include <thread>

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

// Who may answer a reply in its request's place by sending another request (a ServerNode:
// EVAL with the script's source after NOSCRIPT). Without it, the callback would have to wrap
// the caller's in a second std::function, an allocation per request (issue 32).
class Reissuer {
 public:
  // Called with each error reply (not a failure, nor any other reply), and the reply (an array)
  // of a request of several commands (send's `replies`), to a request sent with this reissuer,
  // before its callback, on the thread that read it: true if it sent another request in its
  // place, which took `done` over (moved from); else it may complete `reply` (a hint added to an
  // error, an array read into one reply), which then goes to `done`.
  virtual bool reissue(resp::Reply& reply, const std::shared_ptr<const void>& subject, bool flag,
                       Clock::time_point deadline,
                       std::function<void(Result<resp::Reply>)>& done) = 0;

 protected:
  ~Reissuer() = default;
};
// A request's reissuer and what it needs to send again: `subject`, kept until the reply comes
// or nobody waits for it any more, and a flag of its own.
struct Reissue {
  Reissuer* by = nullptr;
  std::shared_ptr<const void> subject;
  bool flag = false;
};

class Connection {
 public:
  using Callback = std::function<void(Result<resp::Reply>)>;

  using Reissuer = net::Reissuer;
  using Reissue = net::Reissue;

  Connection(asio::io_context& io, NodeAddress address, ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends one RESP-encoded command and calls `done` exactly once: with the reply (which may be
  // an error reply), or with an Error (io_error, timeout, auth_error, protocol_error, or the
  // borrower's `abandoned`). `done` never runs inside send() itself. On the io thread, or on
  // the thread that holds the loan (then it is written by the next borrowed_flush()). The
  // command is copied (into the bytes to write, or the queue): a caller may reuse its buffer.
  // `reissue`: see Reissuer. `epoch` (0: any): the request is written on that connection
  // epoch or not at all, failing with io_error if the connection it was bound to is gone (a
  // caller that chose what to send by what that connection's server said: see ready_epoch()).
  // `replies`: how many commands `command` holds (written together, read as one request):
  // `done` then gets an array of their replies in order (docs/protocol.md, "The native
  // acquisition"), or an Error.
  void send(std::string_view command, Clock::time_point deadline, Callback done,
            Reissue reissue = {}, std::uint64_t epoch = 0, std::uint32_t replies = 1);

  // For a subscriber connection: `on_message` gets every pub/sub message pushed by the server
  // (["message" or "smessage", channel, payload], or ["sunsubscribe", channel, count] when a
  // cluster shard dropped a shard channel whose slot moved away), and `on_ready` runs after each
  // (re)connection so the owner can subscribe again (a new connection has no subscriptions). Set
  // before first use.
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
  // the io thread then). Any thread but the io thread. While the loan lasts, send() from this
  // thread queues the request on the loan: borrowed_flush() writes it.
  bool try_borrow();
  // While borrowed: writes what send() queued (false when the loan broke: the callbacks of every
  // request still waiting have then run with the error), then runs the callbacks of replies
  // already read.
  bool borrowed_flush(Clock::time_point deadline);
  // While borrowed: whether a request waits for its reply, and the socket to poll for it.
  bool borrowed_waiting() const;
  int borrowed_fd() const;
  // While borrowed: reads what the socket has and runs the callbacks of the replies it
  // completes (false when the loan broke, as for borrowed_flush()).
  bool borrowed_read();
  // While borrowed: requests past their deadline get errc::timeout; returns the earliest
  // deadline of those still waiting (time_point::max() if none).
  Clock::time_point borrowed_expire(Clock::time_point now);
  // Ends the loan. Requests still waiting get `abandoned` (the borrower stopped waiting: it
  // had enough answers) and their replies are read and dropped later. After a broken loan or
  // expired requests the io thread takes the connection back (it fails it, or reads the late
  // replies so that a server that stopped answering is noticed); otherwise it stays lendable.
  void give_back(const Error& abandoned);

  // For a command connection: runs after each (re)connection (Node loads its scripts there).
  void set_on_ready(std::function<void()> on_ready) { on_ready_ = std::move(on_ready); }

  // True if the next request would meet a new connection (a new epoch), so that a caller that
  // counts on the epoch can greet first: the connection failed since it was last ready (a
  // connection that always reads, TLS or a subscriber, sees a server's close at once), or it is
  // idle (ready, nothing in flight, not lent) and the server has closed it meanwhile (a server's
  // idle `timeout`, a CLIENT KILL: a poll of the socket). Any thread.
  bool closed_by_server();

  const NodeAddress& address() const noexcept { return address_; }
  // How many times a connection was established (handshake done). A change tells that the
  // server may be a new process: see lock/membership.h. Readable from any thread.
  std::uint64_t epoch() const noexcept { return epoch_.load(std::memory_order_acquire); }
  // The epoch a request sent now may be bound to (send's `epoch`), or 0 when the connection is
  // known to be gone and the next request will meet a new one. Any thread. A connection that
  // fails between this and send() fails a request bound to it.
  std::uint64_t ready_epoch() const noexcept {
    if (dropped_while_ready_.load(std::memory_order_acquire)) return 0;
    return epoch_.load(std::memory_order_acquire);
  }

 private:
  enum class State { idle, connecting, ready };
  struct Failure {
    errc code;
    std::string reason;
  };
  struct Pending {
    std::string command;  // empty once written
    Clock::time_point deadline;
    Clock::time_point sent;
    Callback done;  // empty once answered or timed out
    // The channel of a SUNSUBSCRIBE (else empty): its reply looks like the push a server sends
    // when it drops a shard channel by itself, and is told from one by the channel it names.
    std::string sunsubscribe = {};
    Reissue reissue = {};
    std::uint64_t epoch = 0;    // written only on this connection epoch (0: any)
    std::uint64_t marker = 0;   // a marker (see the top): its number; 0 for a request
    std::uint32_t replies = 1;  // the replies it awaits (a request of several commands)
  };
  // Takes the callback of `p` (nobody waits for its reply any more), and drops its reissue.
  static Callback take(Pending& p) {
    p.reissue = {};
    return std::exchange(p.done, nullptr);
  }
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
  void resume_after_loan(std::optional<Failure> failure);
  // Matches the replies the reader holds to in_flight_ and runs their callbacks. A failure
  // (malformed reply, reply to no request) is returned, not acted on: each driver has its way.
  std::optional<Failure> dispatch();
  // `reply`, one of the replies of the request of several commands `slot`, put with those read
  // before it (partial_): true when it was the last, and `reply` is then all of them, an array.
  bool gathered(const Pending& slot, resp::Reply& reply);
  // The failure of a reply out of place (see the top).
  static Failure out_of_order(const resp::Reply& reply);
  // Hands `reply` to the request of `p` (or to its reissuer first).
  void answer(Pending& p, resp::Reply& reply);
  // Markers (see the top): what a request about to be queued needs (a marker at the end of its
  // write, or one before it); queueing the next marker (its entry and bytes: room reserved
  // first); before out_ is written, the marker that ends it if needed; whether `reply` is a
  // marker's (`n`'s, or any of this connection's for 0).
  void mark_before(std::string_view command);
  void queued(std::string_view command);  // after a request's entry and bytes were queued
  void queue_marker();
  void end_write();
  bool is_marker_reply(const resp::Reply& reply, std::uint64_t n) const;
  // The decimal digits of `n`, written at `buffer` (room for 20: any 64-bit count).
  static std::string_view digits(std::uint64_t n, char* buffer);
  static bool is_asking(std::string_view command);
  static bool is_wait(std::string_view command);
  static bool is_inert(const resp::Reply& reply);  // BUSY, LOADING: the server ran nothing
  bool is_push(const resp::Reply& reply) const;
  static std::string sunsubscribed_channel(std::string_view command);
  // send() on a connection that is lent: queued on the borrower's loan (its own request), or
  // in waiting_ until the loan ends (true); false when it is not lent.
  bool sent_on_loan(std::string_view command, Pending& p);
  // Queues `command` to be written, its reply awaited by `p`: all or nothing if it throws.
  void enqueue(std::string_view command, Pending&& p);
  // The io thread's, before it starts an operation on the socket: puts a socket a loan left
  // out of asio's reactor back in; false if that failed (the connection is failed, later).
  bool unpark();
  void close_bare();
  // While borrowed: writes out_ (reading meanwhile, so neither side can block the other).
  bool borrowed_write(Clock::time_point deadline);
  bool borrowed_receive();  // reads into the reader; false sets loan_failure_
  void break_loan(Failure failure);
  bool live_in_flight() const;  // somebody waits for a reply
  void drain_waiting();
  void update_lendable();
  // Plain command connections read only while replies are due; TLS and subscriber ones always.
  bool reads_always() const { return address_.tls || static_cast<bool>(on_message_); }
  // An idle socket with something to read (or a hang-up) means the server closed it. A probe
  // that found it open stands for kProbeStands (see open_seen_).
  bool peer_closed() const;
  void saw_open(Clock::time_point at) const;  // bytes were read at `at`: as a probe's answer
  void on_timer();
  void expire_waiting(Clock::time_point now);  // during a loan: the requests queued behind it
  void post_error(Callback done, errc code, std::string reason);
  // Why a request bound to an epoch (send's `epoch`) was not written.
  std::string not_on_epoch() const;
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
  // The replies read for the first held_.size() entries of in_flight_, each kept until the
  // marker after it comes back (see the top).
  std::deque<resp::Reply> held_;
  bool unmarked_ = false;      // out_ holds a request queued behind an unanswered one
  std::size_t unwritten_ = 0;  // requests in out_
  std::size_t queued_ = 0;     // entries (requests and markers) in out_: the last of in_flight_
  bool asking_last_ = false;   // the last request in out_ is an ASKING: not written alone
  std::string marker_text_;    // "dlock-sync-<random>-": a marker's text before its number
  std::uint64_t markers_ = 0;  // markers queued so far: the number of the last
  // The io thread's writes still to end with a marker even when lone: requests overlapped
  // lately (see flush()). Reset to kMarkedWritesAfterOverlap at every overlap.
  static constexpr std::uint32_t kMarkedWritesAfterOverlap = 64;
  std::uint32_t marked_writes_ = 0;
  std::size_t handshake_left_ = 0;
  std::string out_;                       // encoded commands not yet handed to the socket
  std::shared_ptr<std::string> writing_;  // the bytes of the last write, see flush()
  bool write_busy_ = false;
  bool writable_ = false;  // the stream is open (TLS done): handshake commands may be written
  std::unique_ptr<resp::Reader> reader_;
  // The replies read so far of a request of several commands (send's `replies`): only the
  // first request without its reply can have some, and it takes them all at once.
  resp::Reply partial_;
  std::array<char, 16384> read_buf_{};
  Clock::time_point last_read_{};

  bool reading_ = false;  // a read is outstanding on the stream

  // The loan, guarded by lend_mu_. lendable_ is kept by the io thread; lent_ by the borrower.
  std::mutex lend_mu_;
  bool lendable_ = false;
  bool lent_ = false;
  std::thread::id lent_to_;      // the borrower
  bool deferred_ = false;        // send() queued a request while the socket was lent
  bool resume_pending_ = false;  // give_back() posted resume_after_loan(), which has not run
  // The socket out of asio's reactor: taken out by a loan (else each reply would wake the io
  // thread for nothing) and left out after it until the io thread drives the socket again
  // (unpark()), so that loan after loan costs no epoll changes (two system calls and the
  // reactor's locks each way, issue 32). The borrower's during a loan, else the io thread's.
  int bare_fd_ = -1;
  bool bare_v6_ = false;
  std::optional<Failure> loan_failure_;
  bool loan_late_ = false;  // requests expired during the loan: their replies are late

  // When (Clock, in ns since its epoch) a probe last found the idle socket open; 0 after a
  // failure. One operation probes up to three times (Membership::greeting_due, the script text's
  // trust in ServerNode, send()), microseconds apart: a poll() each cost the io thread three
  // system calls per request (issue 32). Within kProbeStands the first answer stands; a server
  // that closes meanwhile is found by the request's read instead (an io_error), as one that
  // closes just after a probe always was. Written by whoever probes (the io thread, a borrower,
  // closed_by_server() under lend_mu_) and by every read that returned bytes (saw_open: on 5
  // nodes a cycle outlasts kProbeStands, and a probe before each request was 8.9 of its 12.6
  // poll() calls), cleared by fail() under lend_mu_.
  static constexpr std::chrono::microseconds kProbeStands{50};
  mutable std::atomic<std::int64_t> open_seen_{0};
  std::atomic<std::uint64_t> epoch_{0};
  // A ready connection failed (closed by the server, or by us on an error) and has not been
  // remade yet: its next request reconnects on a new epoch (closed_by_server).
  std::atomic<bool> dropped_while_ready_{false};
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

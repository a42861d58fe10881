// SPDX-License-Identifier: MIT
#include "net/connection.h"

#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

#include "resp/encode.h"

namespace dlock::net {

namespace handler_memory {

// Memory for one asio operation at a time: a connection has at most one read and one write
// pending, and asio otherwise took each from its per-thread cache of two blocks, which the
// other pending operations and the completions handed to other threads kept empty: a malloc
// per read and per write (issue 32). Anything more at once (a TLS stream's own operations) or
// larger gets the heap, as before. Used on the io thread only.
class HandlerSlot {
 public:
  void* allocate(std::size_t size) {
    if (busy_ || size > sizeof(storage_)) return ::operator new(size);
    busy_ = true;
    return storage_;
  }
  void deallocate(void* p) noexcept {
    if (p == static_cast<void*>(storage_)) {
      busy_ = false;
    } else {
      ::operator delete(p);
    }
  }

 private:
  alignas(std::max_align_t) unsigned char storage_[512];
  bool busy_ = false;
};

template <typename T>
class SlotAllocator {
 public:
  using value_type = T;
  explicit SlotAllocator(HandlerSlot& slot) noexcept : slot_(&slot) {}
  template <typename U>
  SlotAllocator(const SlotAllocator<U>& other) noexcept : slot_(other.slot()) {}
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    return static_cast<T*>(slot_->allocate(sizeof(T) * n));
  }
  void deallocate(T* p, std::size_t) noexcept { slot_->deallocate(p); }
  HandlerSlot* slot() const noexcept { return slot_; }
  template <typename U>
  bool operator==(const SlotAllocator<U>& other) const noexcept {
    return slot_ == other.slot();
  }

 private:
  HandlerSlot* slot_;
};

}  // namespace handler_memory

// The byte stream under a connection: plain TCP or TLS over TCP. Handlers of pending
// operations hold a shared_ptr to it, so it outlives a reset connection until they have run;
// so does the memory of their operations (read_slot, write_slot): asio frees an operation's
// memory from a copy of its handler, before that copy goes.
class Connection::Stream {
 public:
  Stream(asio::io_context& io, asio::ssl::context* tls) : tcp(io) {
    if (tls != nullptr)
      ssl = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket&>>(tcp, *tls);
  }
  template <typename Buffer, typename Handler>
  void read_some(const Buffer& buffer, Handler&& handler) {
    if (ssl) {
      ssl->async_read_some(buffer, std::forward<Handler>(handler));
    } else {
      tcp.async_read_some(buffer, std::forward<Handler>(handler));
    }
  }
  template <typename Buffer, typename Handler>
  void write(const Buffer& buffer, Handler&& handler) {
    if (ssl) {
      asio::async_write(*ssl, buffer, std::forward<Handler>(handler));
    } else {
      asio::async_write(tcp, buffer, std::forward<Handler>(handler));
    }
  }
  void close() {
    asio::error_code ignored;
    tcp.close(ignored);
  }

  asio::ip::tcp::socket tcp;
  std::unique_ptr<asio::ssl::stream<asio::ip::tcp::socket&>> ssl;
  handler_memory::HandlerSlot read_slot;
  handler_memory::HandlerSlot write_slot;
};

namespace {

std::string millis(Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

// A marker's PING argument starts so, then a random number per connection object (so that no
// stored value is taken for one), then the marker's count; the server echoes it.
std::string marker_text() {
  std::random_device entropy;
  const std::uint64_t r = (std::uint64_t{entropy()} << 32) | entropy();
  char text[48];
  std::snprintf(text, sizeof(text), "dlock-sync-%016llx-", static_cast<unsigned long long>(r));
  return text;
}

bool is_ip_literal(const std::string& host) {
  asio::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

Connection::Connection(asio::io_context& io, NodeAddress address, ConnectionOptions options)
    : io_(io),
      address_(std::move(address)),
      options_(options),
      resolver_(io),
      timer_(io),
      marker_text_(marker_text()) {}

Connection::~Connection() {
  if (stream_) stream_->close();
  close_bare();
}

Error Connection::error(errc code, const std::string& reason) const {
  return Error(code, reason);
}

std::string Connection::not_on_epoch() const {
  return (last_error_.empty() ? std::string("the connection was remade") : last_error_) +
         " (the request was bound to the connection before)";
}

void Connection::post_error(Callback done, errc code, std::string reason) {
  asio::post(io_, [done = std::move(done), e = error(code, reason)]() { done(e); });
}

void Connection::send(std::string_view command, Clock::time_point deadline, Callback done,
                      Reissue reissue, std::uint64_t epoch, std::uint32_t replies) {
  auto now = Clock::now();
  Pending p{
      {},    deadline, now,    std::move(done), sunsubscribed_channel(command), std::move(reissue),
      epoch, 0,        replies};
  if (sent_on_loan(command, p)) return;
  std::string kept;
  if (state_ == State::ready && !reading_ && !reads_always() && in_flight_.empty() &&
      peer_closed()) {
    // Idle plain connections do not read (see connection.h), so a server that went away is
    // noticed here (with nothing owed, the socket has nothing to read otherwise); fail() lets
    // the first reconnect happen at once. Its callbacks may send again and reuse the buffer
    // `command` is in (a ServerNode encodes into one per thread): the bytes are kept first.
    kept.assign(command);
    command = kept;
    fail(errc::io_error, "connection closed by the server");
    now = Clock::now();
    p.sent = now;
  }
  if (epoch != 0 && (state_ != State::ready || epoch_.load(std::memory_order_relaxed) != epoch)) {
    // Bound to a connection that is gone: not written on the next one.
    post_error(take(p), errc::io_error, not_on_epoch());
    return;
  }
  if (state_ == State::idle) {
    if (now < retry_at_) {
      post_error(take(p), last_code_,
                 last_error_ + " (next reconnect in " + millis(retry_at_ - now) + ")");
      return;
    }
    start_connect();
  }
  p.epoch = 0;  // checked above: written now, or on the connection being made
  if (state_ == State::ready) {
    enqueue(command, std::move(p));
    flush();
    ensure_reading();
  } else {
    p.command = command;
    waiting_.push_back(std::move(p));
  }
  arm_timer(deadline);
}

bool Connection::sent_on_loan(std::string_view command, Pending& p) {
  std::lock_guard lock(lend_mu_);
  if (lent_ && lent_to_ == std::this_thread::get_id()) {
    // The borrower's own request: its next borrowed_flush() writes it, on the epoch the loan
    // was made on (a loan never outlives its connection), so a bound epoch is that one.
    p.epoch = 0;
    enqueue(command, std::move(p));
    return true;
  }
  lendable_ = false;
  if (!lent_) return false;
  // A caller has the socket: queue, and let give_back() bring us back to it.
  deferred_ = true;
  p.command = command;
  const auto deadline = p.deadline;
  waiting_.push_back(std::move(p));
  arm_timer(deadline);
  return true;
}

bool Connection::closed_by_server() {
  // While lendable (and held here), neither the io thread nor a borrower touches the socket:
  // both take lend_mu_ before they do (fail() too, before it closes the stream). With nothing
  // in flight the socket has nothing to read: readable means closed (late replies to requests
  // nobody waits for would be read as a close: then no answer rather than a wrong one).
  // A connection that always reads (TLS, a subscriber) sees the close at once and has already
  // failed, keeping its epoch until it reconnects: that counts too.
  if (dropped_while_ready_.load(std::memory_order_acquire)) return true;
  std::lock_guard lock(lend_mu_);
  return lendable_ && !lent_ && !resume_pending_ && in_flight_.empty() && peer_closed();
}

void Connection::set_keep_connected(bool keep) {
  keep_connected_ = keep;
  // Failed while nobody needed it: no reconnect was planned, so plan one (on_timer connects).
  if (keep && state_ == State::idle) arm_timer(retry_at_);
}

void Connection::start_connect() {
  state_ = State::connecting;
  answered_ = false;
  const auto gen = ++generation_;
  stream_ = std::make_shared<Stream>(io_, address_.tls ? options_.tls_context : nullptr);
  reader_ = std::make_unique<resp::Reader>();
  partial_ = resp::Reply{};
  writable_ = false;
  connect_deadline_ = Clock::now() + options_.connect_timeout;
  arm_timer(connect_deadline_);
  if (address_.tls && options_.tls_context == nullptr) {
    asio::post(io_, [this, gen] {
      if (gen == generation_) fail(errc::invalid_argument, "rediss:// without a TLS context");
    });
    return;
  }
  resolver_.async_resolve(
      address_.host, std::to_string(address_.port),
      [this, gen](const asio::error_code& ec, const asio::ip::tcp::resolver::results_type& hosts) {
        if (gen != generation_) return;
        if (ec) return fail(errc::io_error, "cannot resolve host: " + ec.message());
        asio::async_connect(
            stream_->tcp, hosts,
            [this, gen, s = stream_](const asio::error_code& cec, const asio::ip::tcp::endpoint&) {
              if (gen != generation_) return;
              if (cec) return fail(errc::io_error, "cannot connect: " + cec.message());
              asio::error_code ignored;
              s->tcp.set_option(asio::ip::tcp::no_delay(true), ignored);
              if (!s->ssl) return on_connected();
              if (!is_ip_literal(address_.host)) {
                SSL_set_tlsext_host_name(s->ssl->native_handle(), address_.host.c_str());
              }
              s->ssl->set_verify_callback(asio::ssl::host_name_verification(address_.host));
              s->ssl->async_handshake(
                  asio::ssl::stream_base::client, [this, gen, s](const asio::error_code& hec) {
                    if (gen != generation_) return;
                    if (hec) {
                      return fail(errc::io_error, "TLS handshake failed: " + hec.message());
                    }
                    on_connected();
                  });
            });
      });
}

void Connection::on_connected() {
  writable_ = true;
  last_read_ = Clock::now();
  if (reads_always()) ensure_reading();
  send_handshake();
}

// AUTH and SELECT go first, and nothing else is written until they succeeded: a command run
// on the wrong database would act on the wrong keys. Without a password a PING goes first: a
// server that wants one answers NOAUTH there, which fails the connection with an error that
// says so. Otherwise the first lock command would meet it, and one with more than 10 arguments
// gets only "Protocol error: unauthenticated multibulk length" before the server hangs up.
void Connection::send_handshake() {
  std::vector<std::pair<std::string, std::string>> steps;  // command, what it does
  if (address_.password.empty()) {
    steps.emplace_back(resp::encode_command({"PING"}), "PING (no password given)");
  } else {
    std::vector<std::string_view> args{"AUTH"};
    if (!address_.user.empty()) args.emplace_back(address_.user);
    args.emplace_back(address_.password);
    steps.emplace_back(resp::encode_command(args), "AUTH");
  }
  if (address_.db != 0) {
    const std::string db = std::to_string(address_.db);
    steps.emplace_back(resp::encode_command({"SELECT", db}), "SELECT " + db);
  }
  // With a password too: the markers of pipelined requests are PINGs (see connection.h), and an
  // ACL user without PING is better refused here, saying so, than at its first pipelined call.
  if (!address_.password.empty()) {
    steps.emplace_back(resp::encode_command({"PING"}),
                       "PING (dlock checks the order of pipelined replies with it)");
  }
  handshake_left_ = steps.size();
  if (steps.empty()) return become_ready();
  for (auto& [command, what] : steps) {
    out_ += command;
    in_flight_.push_back(
        Pending{{}, connect_deadline_, Clock::now(), [this, what = what](Result<resp::Reply> r) {
                  if (!r) return;  // the connection failed; fail() reported it already
                  if (r->is_error()) return fail(errc::auth_error, what + " refused: " + r->str);
                  if (--handshake_left_ == 0) become_ready();
                }});
  }
  flush();
  ensure_reading();
}

void Connection::become_ready() {
  state_ = State::ready;
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  dropped_while_ready_.store(false, std::memory_order_release);
  connect_deadline_ = Clock::time_point::max();
  drain_waiting();
  if (on_ready_) on_ready_();
  update_lendable();
}

// Writes the requests that waited for the connection (or for a loan to end).
void Connection::drain_waiting() {
  const std::uint64_t now_on = epoch_.load(std::memory_order_relaxed);
  while (!waiting_.empty()) {
    Pending& front = waiting_.front();
    if (front.done && front.epoch != 0 && front.epoch != now_on) {
      post_error(take(front), errc::io_error, not_on_epoch());
    } else if (front.done) {
      // As enqueue(), and the entry leaves waiting_ only once it is in in_flight_: a bad_alloc
      // leaves it waiting, its callback kept (a deque's push_back that throws changes nothing).
      mark_before(front.command);
      out_.reserve(out_.size() + front.command.size());
      in_flight_.push_back(std::move(front));
      out_ += in_flight_.back().command;
      queued(in_flight_.back().command);
      std::string().swap(in_flight_.back().command);  // "empty once written"
    }
    waiting_.pop_front();
  }
  flush();
  if (!in_flight_.empty()) ensure_reading();
}

void Connection::enqueue(std::string_view command, Pending&& p) {
  // The room first, then the entry, then the bytes (which then cannot throw): a bad_alloc
  // leaves neither bytes on the wire whose reply no callback waits for (it would be taken for
  // the next request's) nor an entry whose request is never written.
  // A marker it needs goes first (an entry of its own: a bad_alloc after it leaves a marker in
  // flight, which costs nothing).
  mark_before(command);
  out_.reserve(out_.size() + command.size());
  in_flight_.push_back(std::move(p));
  out_ += command;
  queued(command);
}

void Connection::mark_before(std::string_view command) {
  if (on_message_) return;
  // Queued behind an unanswered request: the write it goes in ends with a marker (end_write),
  // and so do the io thread's next writes, lone or not (flush).
  if (!in_flight_.empty()) {
    unmarked_ = true;
    marked_writes_ = kMarkedWritesAfterOverlap;
  }
  // A WAIT (the replica guard's, which the server holds for up to its timeout) behind requests
  // of the same write gets one before it too: their replies would otherwise wait for it.
  if (unwritten_ > 0 && is_wait(command)) queue_marker();
}

void Connection::queued(std::string_view command) {
  ++unwritten_;
  ++queued_;
  asking_last_ = is_asking(command);
}

std::string_view Connection::digits(std::uint64_t n, char* buffer) {
  const auto end = std::to_chars(buffer, buffer + 20, n).ptr;
  return std::string_view(buffer, static_cast<std::size_t>(end - buffer));
}

void Connection::queue_marker() {
  const std::uint64_t n = markers_ + 1;
  char count_digits[20];
  const std::string_view count = digits(n, count_digits);
  char length_digits[20];
  const std::string_view length = digits(marker_text_.size() + count.size(), length_digits);
  // Appended piece by piece (snprintf was about 3% of an asio cycle's client instructions).
  constexpr std::string_view kPing = "*2\r\n$4\r\nPING\r\n$";
  // The room, then the entry, then the bytes (which then cannot throw): all or nothing.
  out_.reserve(out_.size() + kPing.size() + length.size() + marker_text_.size() + count.size() + 4);
  in_flight_.push_back(Pending{{}, Clock::time_point::max(), Clock::now(), nullptr});
  in_flight_.back().marker = n;
  out_.append(kPing)
      .append(length)
      .append("\r\n")
      .append(marker_text_)
      .append(count)
      .append("\r\n");
  ++queued_;
  markers_ = n;
}

void Connection::end_write() {
  if (unmarked_) queue_marker();
  unmarked_ = false;
  unwritten_ = 0;
  queued_ = 0;  // all of out_ is handed to the socket now
}

bool Connection::is_marker_reply(const resp::Reply& reply, std::uint64_t n) const {
  if (reply.type != resp::Reply::Type::string ||
      reply.str.compare(0, marker_text_.size(), marker_text_) != 0) {
    return false;
  }
  char count[20];
  return n == 0 || std::string_view(reply.str).substr(marker_text_.size()) == digits(n, count);
}

bool Connection::is_asking(std::string_view command) {
  // As resp::encode_command writes it (ServerNode sends it so, right before its command).
  return command == "*1\r\n$6\r\nASKING\r\n";
}

bool Connection::is_wait(std::string_view command) {
  constexpr std::string_view kWait = "*3\r\n$4\r\nWAIT\r\n";  // as resp::encode_command writes it
  return command.substr(0, kWait.size()) == kWait;
}

bool Connection::is_inert(const resp::Reply& reply) {
  return reply.is_error() && (reply.is_error_code("BUSY") || reply.is_error_code("LOADING"));
}

void Connection::fail(errc code, const std::string& reason) {
  const bool was_ready = state_ == State::ready;
  if (was_ready) dropped_while_ready_.store(true, std::memory_order_release);
  ++generation_;
  state_ = State::idle;
  writable_ = false;
  write_busy_ = false;
  reading_ = false;
  {
    std::lock_guard lock(lend_mu_);
    lendable_ = false;
    open_seen_.store(0, std::memory_order_relaxed);
  }
  handshake_left_ = 0;
  connect_deadline_ = Clock::time_point::max();
  if (stream_) {
    stream_->close();
    stream_.reset();
  }
  close_bare();
  resolver_.cancel();
  out_.clear();
  held_.clear();
  partial_ = resp::Reply{};
  unmarked_ = false;
  unwritten_ = 0;
  queued_ = 0;
  asking_last_ = false;
  last_error_ = reason;
  last_code_ = code;
  // A connection that worked may reconnect at once (the server restarted, or closed an idle
  // connection); failures after that back off. "Worked" means it answered something other
  // than an error: a server at maxclients accepts, sends an error and hangs up, and a
  // subscriber (which reconnects by itself) would otherwise loop on it thousands of times a
  // second.
  const bool worked = was_ready && answered_;
  if (worked) {
    backoff_ = std::chrono::milliseconds(0);
  } else {
    backoff_ =
        backoff_.count() == 0 ? options_.backoff_min : std::min(backoff_ * 2, options_.backoff_max);
  }
  retry_at_ = Clock::now() + (worked ? Clock::duration::zero() : Clock::duration(backoff_));
  if (keep_connected_) arm_timer(retry_at_);  // on_timer() reconnects

  // Callbacks may send again (and find the connection idle), so detach the queues first.
  std::deque<Pending> dropped;
  dropped.swap(in_flight_);
  for (auto& p : waiting_) dropped.push_back(std::move(p));
  waiting_.clear();
  for (auto& p : dropped) {
    if (p.done) p.done(error(code, reason));
  }
}

void Connection::flush() {
  // An ASKING waits for its command, written with it.
  if (write_busy_ || !writable_ || out_.empty() || asking_last_ || !unpark()) return;
  // A write ends with a marker when it holds a request queued behind an unanswered one
  // (mark_before), and so does every write of the io thread that holds a request while requests
  // overlapped lately: the next write may go out before the replies to this one are read, and
  // then they would wait for that write's marker, which comes back only after the server ran
  // that write too (it answers what it read at once together; a lone group-commit batch held
  // for the next batch's run cost the asio API 30% of its throughput). A connection whose
  // requests go one at a time (nothing unanswered when each is queued, the last
  // kMarkedWritesAfterOverlap writes) writes no marker: a reply read before anything else was
  // written is its own, as a borrower's is; should a write follow before it is read after all,
  // that one reply waits for the write's marker. Two PINGs per lock cycle saved at one in
  // flight (issue 32, bench/notes.md).
  if (unwritten_ > 0 && !on_message_ && marked_writes_ > 0) {
    unmarked_ = true;
    --marked_writes_;
  }
  end_write();
  write_busy_ = true;
  // The write's bytes, shared with its handler (a reconnection may replace the stream while it
  // is in flight). Reused once no write holds it: a new buffer per write cost two allocations
  // per request, the buffer and out_ growing again from nothing (issue 32).
  if (!writing_ || writing_.use_count() > 1) writing_ = std::make_shared<std::string>();
  writing_->clear();
  writing_->swap(out_);
  auto buffer = writing_;
  const auto gen = generation_;
  auto& slot = stream_->write_slot;
  stream_->write(asio::buffer(*buffer),
                 asio::bind_allocator(
                     handler_memory::SlotAllocator<void>(slot),
                     [this, gen, buffer, s = stream_](const asio::error_code& ec, std::size_t) {
                       if (gen != generation_) return;
                       write_busy_ = false;
                       if (ec) return fail(errc::io_error, "write failed: " + ec.message());
                       flush();
                       update_lendable();
                     }));
}

void Connection::ensure_reading() {
  if (!reading_ && stream_ && writable_) start_read();
}

bool Connection::unpark() {
  if (bare_fd_ < 0) return true;
  asio::error_code ec;
  stream_->tcp.assign(bare_v6_ ? asio::ip::tcp::v6() : asio::ip::tcp::v4(), bare_fd_, ec);
  if (!ec) {
    bare_fd_ = -1;
    return true;
  }
  close_bare();
  // Not here: a caller's send() must not run callbacks inside it.
  asio::post(io_, [this, gen = generation_, why = ec.message()] {
    if (gen == generation_) fail(errc::io_error, "cannot take the socket back: " + why);
  });
  return false;
}

void Connection::close_bare() {
  if (bare_fd_ < 0) return;
  ::close(bare_fd_);
  bare_fd_ = -1;
}

void Connection::start_read() {
  if (!unpark()) return;
  reading_ = true;
  const auto gen = generation_;
  auto& slot = stream_->read_slot;
  stream_->read_some(
      asio::buffer(read_buf_),
      asio::bind_allocator(handler_memory::SlotAllocator<void>(slot),
                           [this, gen, s = stream_](const asio::error_code& ec, std::size_t n) {
                             if (gen != generation_) return;
                             if (ec == asio::error::eof) {
                               return fail(errc::io_error, "connection closed by the server");
                             }
                             if (ec) return fail(errc::io_error, "read failed: " + ec.message());
                             on_read(n);
                           }));
}

void Connection::on_read(std::size_t n) {
  last_read_ = Clock::now();
  saw_open(last_read_);
  if (!reader_->feed(std::string_view(read_buf_.data(), n))) {
    return fail(errc::protocol_error, "malformed reply: " + reader_->error());
  }
  const auto gen = generation_;
  if (auto failure = dispatch()) return fail(failure->code, failure->reason);
  if (gen != generation_) return;  // a callback reset the connection
  // A command connection reads only while it waits for replies, so an idle one has nothing
  // outstanding on its socket and can be lent to a caller. A subscriber reads all the time.
  if (in_flight_.empty() && !reads_always()) {
    reading_ = false;
    update_lendable();
    return;
  }
  start_read();
}

std::string Connection::sunsubscribed_channel(std::string_view command) {
  // As resp::encode_command writes it: *2\r\n$12\r\nSUNSUBSCRIBE\r\n$<n>\r\n<channel>\r\n
  constexpr std::string_view kHead = "*2\r\n$12\r\nSUNSUBSCRIBE\r\n$";
  if (command.compare(0, kHead.size(), kHead) != 0) return {};
  const auto length_end = command.find("\r\n", kHead.size());
  if (length_end == std::string_view::npos) return {};
  std::string channel(command.substr(length_end + 2));
  if (channel.size() < 2) return {};
  channel.resize(channel.size() - 2);  // the closing \r\n
  return channel;
}

bool Connection::is_push(const resp::Reply& reply) const {
  if (!reply.is_array() || reply.elements.size() != 3) return false;
  const std::string& kind = reply.elements[0].str;
  if (kind == "message" || kind == "smessage") return true;
  // Our own SUNSUBSCRIBE is answered in order, naming its channel; any other is the server's
  // (a channel of another slot may be dropped while ours is under way).
  return kind == "sunsubscribe" &&
         (in_flight_.empty() || in_flight_.front().sunsubscribe != reply.elements[1].str);
}

std::optional<Connection::Failure> Connection::dispatch() {
  const auto gen = generation_;
  for (;;) {
    std::optional<resp::Reply> reply = reader_->next();
    if (!reply) {
      if (!reader_->error().empty()) {
        return Failure{errc::protocol_error, "malformed reply: " + reader_->error()};
      }
      return std::nullopt;
    }
    if (on_message_ && is_push(*reply)) {
      on_message_(*reply);  // a push, not the reply to a request
      continue;
    }
    // The first request without a reply: the ones before it hold theirs (see the top).
    const std::size_t next = held_.size();
    if (next >= in_flight_.size()) return Failure{errc::protocol_error, "reply to no request"};
    if (!reply->is_error()) answered_ = true;
    Pending& slot = in_flight_[next];
    if (slot.marker != 0 && !is_inert(*reply)) {
      if (!is_marker_reply(*reply, slot.marker)) return out_of_order(*reply);
      // The marker came back in its place: every reply before it is its request's. Its entry
      // goes first, so that a callback that throws leaves the rest held, still in step.
      in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(next));
      for (std::size_t k = 0; k < next; ++k) {
        Pending p = std::move(in_flight_.front());
        in_flight_.pop_front();
        resp::Reply held = std::move(held_.front());
        held_.pop_front();
        answer(p, held);
        if (gen != generation_) return std::nullopt;  // the callback reset the connection
      }
      continue;
    }
    if (slot.marker == 0 && is_marker_reply(*reply, 0)) return out_of_order(*reply);
    if (slot.replies > 1 && !gathered(slot, *reply)) continue;
    // BUSY or LOADING in a marker's place (PING is refused where a script is) is the marker's
    // own unless a reply was lost: it proves nothing, and the replies held before it wait for
    // the next marker (the one ending the next write, or their deadlines).
    slot.marker = 0;
    // Kept until a marker behind it comes back: a reply behind one kept so (the callbacks keep
    // their order), and any reply but BUSY or LOADING (which ran nothing: handed to the wrong
    // request, they only fail it) to a live request with a request or marker handed to the
    // socket after it (entries still in out_ have no replies yet). An error is kept too: a
    // redirect (ASK, MOVED) or NOSCRIPT sends the request again. Not the handshake's (AUTH,
    // SELECT, PING): nothing else is written until it is done, and a reply lost there leaves it
    // unfinished, which fails the connection at the connect timeout. Nor a subscriber's, which
    // writes no markers (its replies grant nothing).
    const std::size_t sent_after = in_flight_.size() - queued_ - (next + 1);
    const bool behind = next > 0 || (sent_after > 0 && slot.done && !is_inert(*reply));
    if (state_ == State::ready && !on_message_ && behind) {
      held_.push_back(std::move(*reply));
      continue;
    }
    Pending p = std::move(in_flight_.front());
    in_flight_.pop_front();
    answer(p, *reply);
    if (gen != generation_) return std::nullopt;  // the callback reset the connection
  }
}

bool Connection::gathered(const Pending& slot, resp::Reply& reply) {
  // A request of several commands: its replies, each checked as any (dispatch), make one
  // array, which then goes on as any reply does (held behind a marker, or answered).
  partial_.type = resp::Reply::Type::array;
  if (partial_.elements.empty()) partial_.elements.reserve(slot.replies);
  partial_.elements.push_back(std::move(reply));
  if (partial_.elements.size() < slot.replies) return false;
  reply = std::exchange(partial_, resp::Reply{});
  return true;
}

Connection::Failure Connection::out_of_order(const resp::Reply& reply) {
  if (reply.is_error()) {
    // An ACL that lost PING meanwhile (the handshake's would say so), or a proxy that refuses it.
    return Failure{errc::protocol_error,
                   "the server refused the PING that checks the order of pipelined replies (" +
                       reply.str + "): the replies before it cannot be told apart"};
  }
  return Failure{errc::protocol_error,
                 "a reply was lost (something between dlock and the server, such as a proxy, "
                 "dropped it while keeping the connection): the replies after it cannot be told "
                 "apart"};
}

void Connection::answer(Pending& p, resp::Reply& reply) {
  if (p.done &&
      (p.reissue.by == nullptr || (!reply.is_error() && p.replies == 1) ||
       !p.reissue.by->reissue(reply, p.reissue.subject, p.reissue.flag, p.deadline, p.done))) {
    p.done(std::move(reply));
  }
}

bool Connection::live_in_flight() const {
  return std::any_of(in_flight_.begin(), in_flight_.end(),
                     [](const Pending& p) { return static_cast<bool>(p.done); });
}

void Connection::update_lendable() {
  // Requests nobody waits for any more may still be in flight: their replies are dropped by
  // whoever drives the socket next.
  const bool idle = state_ == State::ready && !reads_always() && !reading_ && !write_busy_ &&
                    out_.empty() && waiting_.empty() && !live_in_flight();
  std::lock_guard lock(lend_mu_);
  lendable_ = idle && !lent_ && !resume_pending_;
}

bool Connection::try_borrow() {
  {
    std::lock_guard lock(lend_mu_);
    if (!lendable_ || lent_) return false;
    lent_ = true;
    lent_to_ = std::this_thread::get_id();
    lendable_ = false;
  }
  // Out of the reactor for the loan (if the last loan did not leave it out already): asio keeps
  // every socket in epoll, and each reply would otherwise wake the io thread for nothing (a
  // context switch per round trip).
  asio::error_code ec;
  if (bare_fd_ < 0) {
    const auto local = stream_->tcp.local_endpoint(ec);
    bare_v6_ = !ec && local.address().is_v6();
    const int fd = ec ? -1 : stream_->tcp.release(ec);
    if (!ec) bare_fd_ = fd;
  }
  if (ec) {
    loan_failure_ = Failure{errc::io_error, "cannot lend the socket: " + ec.message()};
  } else if (in_flight_.empty() && peer_closed()) {
    // With nothing in flight the socket has nothing to read: readable means closed.
    loan_failure_ = Failure{errc::io_error, "connection closed by the server"};
  }
  if (loan_failure_) {
    give_back(Error(errc::cancelled, "not sent"));
    return false;
  }
  return true;
}

int Connection::borrowed_fd() const {
  return bare_fd_;
}

bool Connection::borrowed_waiting() const {
  return !loan_failure_ && live_in_flight();
}

void Connection::saw_open(Clock::time_point at) const {
  // Bytes read prove the socket open as much as a probe's poll() at that instant would (a close
  // right behind them is found by the next request's read, as one right after a probe is).
  // Before the reply's callbacks run, so a failure they or the parser cause clears it after.
  open_seen_.store(at.time_since_epoch().count(), std::memory_order_relaxed);
}

bool Connection::peer_closed() const {
  const std::int64_t now = Clock::now().time_since_epoch().count();
  const std::int64_t seen = open_seen_.load(std::memory_order_relaxed);
  if (seen != 0 && now - seen < std::chrono::nanoseconds(kProbeStands).count()) return false;
  const int fd = bare_fd_ >= 0 ? bare_fd_ : stream_->tcp.native_handle();
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  const bool closed = ::poll(&p, 1, 0) != 0;
  if (!closed) open_seen_.store(now, std::memory_order_relaxed);
  return closed;
}

void Connection::break_loan(Failure failure) {
  if (!loan_failure_) loan_failure_ = std::move(failure);
  out_.clear();
  unmarked_ = false;
  unwritten_ = 0;
  queued_ = 0;
  asking_last_ = false;
  // Callbacks may send (and so grow in_flight_): take them out first.
  std::vector<Callback> live;
  for (auto& p : in_flight_) {
    if (p.done) live.push_back(take(p));
  }
  for (auto& done : live) done(error(loan_failure_->code, loan_failure_->reason));
}

bool Connection::borrowed_flush(Clock::time_point deadline) {
  // Until nothing is left to write: replies read while a write waited for room are dispatched
  // here, and their callbacks may send again (a NOSCRIPT retry).
  while (!loan_failure_) {
    if (!out_.empty() && !borrowed_write(deadline)) break;
    if (auto failure = dispatch()) {
      loan_failure_ = std::move(failure);
      break;
    }
    if (out_.empty()) break;
  }
  if (loan_failure_) {
    break_loan(*loan_failure_);
    return false;
  }
  return true;
}

bool Connection::borrowed_read() {
  if (!loan_failure_ && borrowed_receive()) {
    if (auto failure = dispatch()) loan_failure_ = std::move(failure);
  }
  if (loan_failure_) {
    break_loan(*loan_failure_);
    return false;
  }
  return true;
}

bool Connection::borrowed_write(Clock::time_point deadline) {
  end_write();
  const int fd = borrowed_fd();
  std::string_view bytes(out_);
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        // Part of a request may be on the wire: the connection cannot be used any more.
        loan_failure_ = Failure{errc::timeout, "write did not complete in time"};
        return false;
      }
      // Keep reading while the socket is full: a server that cannot send its replies may stop
      // reading our requests, and then neither side would move.
      pollfd p{fd, POLLOUT | POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) > 0 && (p.revents & POLLIN) != 0 &&
          !borrowed_receive()) {
        return false;
      }
      continue;
    }
    loan_failure_ = Failure{errc::io_error, std::string("write failed: ") + std::strerror(errno)};
    return false;
  }
  out_.clear();
  return true;
}

bool Connection::borrowed_receive() {
  for (;;) {
    const ssize_t n = ::recv(borrowed_fd(), read_buf_.data(), read_buf_.size(), MSG_DONTWAIT);
    if (n > 0) {
      last_read_ = Clock::now();
      saw_open(last_read_);
      if (!reader_->feed(std::string_view(read_buf_.data(), static_cast<std::size_t>(n)))) {
        loan_failure_ = Failure{errc::protocol_error, "malformed reply: " + reader_->error()};
        return false;
      }
      if (static_cast<std::size_t>(n) < read_buf_.size()) return true;
      continue;  // the buffer was full: there may be more
    }
    if (n == 0) {
      loan_failure_ = Failure{errc::io_error, "connection closed by the server"};
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    loan_failure_ = Failure{errc::io_error, std::string("read failed: ") + std::strerror(errno)};
    return false;
  }
}

Clock::time_point Connection::borrowed_expire(Clock::time_point now) {
  std::vector<std::pair<Callback, Clock::duration>> expired;
  auto next = Clock::time_point::max();
  for (auto& p : in_flight_) {
    if (!p.done) continue;
    if (p.deadline <= now) {
      expired.emplace_back(take(p), p.deadline - p.sent);
    } else {
      next = std::min(next, p.deadline);
    }
  }
  if (!expired.empty()) loan_late_ = true;
  for (auto& [done, timeout] : expired) {
    done(error(errc::timeout, "no reply within " + millis(timeout)));
  }
  return next;
}

void Connection::give_back(const Error& abandoned) {
  // The requests waiting now, by index: a callback may send (the deque grows at its end, its
  // elements stay where they are), and what it sends is the io thread's to write and answer;
  // none may fail() the connection (which would empty the deque under the loop: only the io
  // thread fails it), and today's (a round's Answer, the observer's and the replica guard's
  // wrappers) send nothing here. No list of callbacks is built, so that run_borrowed can give a
  // loan back while an exception unwinds; each callback still gets a copy of `abandoned` (its
  // message: an allocation), so a second bad_alloc there, memory being exhausted, terminates.
  const std::size_t waiting = in_flight_.size();
  for (std::size_t k = 0; k < waiting; ++k) {
    if (Callback done = take(in_flight_[k])) done(abandoned);
  }
  // The socket stays out of asio's reactor (bare_fd_) until the io thread needs it (unpark()).
  std::optional<Failure> failure = std::exchange(loan_failure_, std::nullopt);
  const bool late = std::exchange(loan_late_, false);
  bool resume = false;
  {
    std::lock_guard lock(lend_mu_);
    lent_ = false;
    lent_to_ = std::thread::id();
    // Unwritten requests (a callback sent after the last flush) are the io thread's to write.
    resume = failure.has_value() || late || deferred_ || !out_.empty();
    deferred_ = false;
    // Until the io thread has taken the connection back nothing may lend it again: it may be
    // about to fail it (update_lendable() on the io thread, from on_timer, honours this too).
    resume_pending_ = resume;
    lendable_ = !resume;
  }
  if (resume) {
    asio::post(io_, [this, failure = std::move(failure)] { resume_after_loan(failure); });
  }
}

void Connection::resume_after_loan(std::optional<Failure> failure) {
  {
    std::lock_guard lock(lend_mu_);
    resume_pending_ = false;  // not lendable since give_back(): nobody can hold a loan now
    lendable_ = false;
  }
  if (failure) return fail(failure->code, failure->reason);
  if (state_ != State::ready) return;
  drain_waiting();
  if (!in_flight_.empty()) {
    // Late replies: read them, so that a server that stopped answering is noticed; requests
    // the borrower sent after its last flush keep their deadlines.
    ensure_reading();
    auto next = std::max(last_read_, in_flight_.front().sent) + options_.stall_timeout;
    for (const auto& p : in_flight_) {
      if (p.done) next = std::min(next, p.deadline);
    }
    arm_timer(next);
  }
  update_lendable();
}

void Connection::arm_timer(Clock::time_point when) {
  if (when >= timer_at_) return;
  timer_at_ = when;
  timer_.expires_at(when);
  timer_.async_wait([this](const asio::error_code& ec) {
    if (ec == asio::error::operation_aborted) return;
    timer_at_ = Clock::time_point::max();
    on_timer();
  });
}

void Connection::on_timer() {
  const auto now = Clock::now();
  bool lent = false;
  {
    // Not lendable while this runs: it reads and changes in_flight_, the borrower's during a
    // loan. During a loan only the requests queued behind it are looked at.
    std::lock_guard lock(lend_mu_);
    lent = lent_;
    lendable_ = false;
  }
  if (lent) return expire_waiting(now);
  if (state_ == State::connecting && now >= connect_deadline_) {
    fail(errc::timeout, "no connection within " + millis(options_.connect_timeout));
  }
  // Only a connection that reads can tell a stall: after a loan, replies nobody waits for may
  // sit unread until the next request.
  if (state_ == State::ready && reading_ && !in_flight_.empty()) {
    const auto quiet_since = std::max(last_read_, in_flight_.front().sent);
    if (now - quiet_since >= options_.stall_timeout) {
      fail(errc::timeout, "node stopped answering for " + millis(now - quiet_since));
    }
  }

  if (keep_connected_ && state_ == State::idle && now >= retry_at_) start_connect();

  // Collect expired callbacks before running any: they may send and so grow the queues.
  std::vector<std::pair<Callback, Clock::duration>> expired;
  for (auto& p : in_flight_) {
    if (p.done && p.deadline <= now) expired.emplace_back(take(p), p.deadline - p.sent);
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->deadline <= now) {
      if (it->done) expired.emplace_back(take(*it), it->deadline - it->sent);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [done, timeout] : expired) {
    done(error(errc::timeout, "no reply within " + millis(timeout)));
  }

  auto next = Clock::time_point::max();
  if (state_ == State::connecting) next = connect_deadline_;
  if (keep_connected_ && state_ == State::idle) next = std::min(next, retry_at_);
  for (const auto& p : in_flight_) {
    if (p.done) next = std::min(next, p.deadline);
  }
  for (const auto& p : waiting_) next = std::min(next, p.deadline);
  if (state_ == State::ready && reading_ && !in_flight_.empty()) {
    next = std::min(next, std::max(last_read_, in_flight_.front().sent) + options_.stall_timeout);
  }
  if (next != Clock::time_point::max()) arm_timer(next);
  update_lendable();
}

void Connection::expire_waiting(Clock::time_point now) {
  std::vector<std::pair<Callback, Clock::duration>> expired;
  auto next = Clock::time_point::max();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->deadline <= now) {
      if (it->done) expired.emplace_back(take(*it), it->deadline - it->sent);
      it = waiting_.erase(it);
    } else {
      next = std::min(next, it->deadline);
      ++it;
    }
  }
  for (auto& [done, timeout] : expired) {
    done(error(errc::timeout, "no reply within " + millis(timeout)));
  }
  if (next != Clock::time_point::max()) arm_timer(next);
}

}  // namespace dlock::net

// SPDX-License-Identifier: MIT
#include "service/http_server.h"

#include <http_parser.h>
#include <strings.h>

#include <algorithm>
#include <array>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/write.hpp>
#include <iostream>
#include <memory>

namespace dlock::service {

namespace {

// What a connection may send ahead while its request is served: a few requests' worth.
constexpr std::size_t kMaxPipelined = 4 * kMaxBody;

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 409:
      return "Conflict";
    case 429:
      return "Too Many Requests";
    case 413:
      return "Payload Too Large";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

}  // namespace

// One connection. Everything runs on the server's io thread; an operation's completion is
// posted back to it. Owned by its pending asio handlers (shared_from_this).
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> tls,
              const HttpHandlers& handlers, asio::io_context& io,
              std::chrono::milliseconds idle_timeout)
      : tls_(std::move(tls)),
        stream_(std::move(socket), tls_.get()),
        handlers_(handlers),
        io_(io),
        idle_timeout_(idle_timeout),
        timer_(io) {
    std::error_code ec;
    const auto peer = stream_.socket().remote_endpoint(ec);
    if (!ec) address_ = peer.address().to_string();
    http_parser_init(&parser_, HTTP_REQUEST);
    parser_.data = this;
    http_parser_settings_init(&settings_);
    settings_.on_url = [](http_parser* p, const char* at, std::size_t n) {
      return self(p).on_url(at, n);
    };
    settings_.on_header_field = [](http_parser* p, const char* at, std::size_t n) {
      return self(p).on_header_field(at, n);
    };
    settings_.on_header_value = [](http_parser* p, const char* at, std::size_t n) {
      return self(p).on_header_value(at, n);
    };
    settings_.on_body = [](http_parser* p, const char* at, std::size_t n) {
      return self(p).on_body(at, n);
    };
    settings_.on_message_complete = [](http_parser* p) {
      // Pause: the bytes after this request wait until it has been answered.
      http_parser_pause(p, 1);
      self(p).complete_ = true;
      return 0;
    };
  }

  // The server stops, or the client was too slow: the connection closes, and a wait in flight
  // ends.
  void close() {
    gone_ = true;
    if (pending_) pending_->cancel();
    timer_.cancel();
    std::error_code ignored;
    stream_.socket().close(ignored);
  }

  // No request is being served (one may be arriving): stop() may close it at once.
  bool idle() const noexcept { return !busy_; }
  // stop(): the answer being made is the last (Connection: close).
  void close_after_answer() { closing_ = true; }

  // The TLS handshake (a client that fails it, e.g. without the required certificate, is
  // dropped without a word), then the first read; both within the idle timeout.
  void start() {
    arm();
    stream_.async_handshake([s = shared_from_this()](std::error_code ec) {
      if (ec) {
        std::error_code ignored;
        s->stream_.socket().close(ignored);
        return;
      }
      s->read();
    });
  }

  void read() {
    stream_.async_read_some(
        asio::buffer(buffer_),
        [s = shared_from_this()](std::error_code ec, std::size_t n) { s->received(ec, n); });
  }

 private:
  static HttpSession& self(http_parser* p) { return *static_cast<HttpSession*>(p->data); }

  // The client has idle_timeout_ from now to complete a request (or the handshake): a silent
  // or trickling client cannot keep its connection, and its place, for ever.
  void arm() {
    timer_.expires_after(idle_timeout_);
    timer_.async_wait([s = shared_from_this()](std::error_code ec) {
      if (!ec && !s->busy_) s->close();
    });
  }
  int on_url(const char* at, std::size_t n) {
    request_.target.append(at, n);
    return 0;
  }
  // Header names and values may come in pieces (http-parser bounds their total, 80 KiB). Only
  // Authorization is kept.
  int on_header_field(const char* at, std::size_t n) {
    if (in_value_) field_.clear();
    in_value_ = false;
    field_.append(at, n);
    return 0;
  }
  int on_header_value(const char* at, std::size_t n) {
    in_value_ = true;
    if (strcasecmp(field_.c_str(), "authorization") == 0) {
      request_.caller.authorization.append(at, n);
    }
    return 0;
  }
  int on_body(const char* at, std::size_t n) {
    if (request_.body.size() + n > kMaxBody) {
      too_large_ = true;
      return 1;  // an error: stops the parser
    }
    request_.body.append(at, n);
    return 0;
  }

  void received(std::error_code ec, std::size_t n) {
    if (ec) {
      // The client went away (or the server stops): a wait in flight ends and leaves
      // nothing behind; its answer, when it comes, is dropped.
      gone_ = true;
      if (busy_ && pending_) pending_->cancel();
      return;
    }
    input_.append(buffer_.data(), n);
    if (busy_ && input_.size() > kMaxPipelined) {
      // A client that sends request after request while one waits: it is not read without
      // bounds (memory); the connection closes, and the request in flight ends.
      return close();
    }
    if (!busy_) parse();
    read();  // always one read outstanding, so that a hang-up is seen at once
  }

  void parse() {
    const std::size_t used =
        http_parser_execute(&parser_, &settings_, input_.data(), input_.size());
    input_.erase(0, used);
    if (complete_) return dispatch();
    if (too_large_) return respond(error_response(413, "body over 64 KiB"), false);
    if (HTTP_PARSER_ERRNO(&parser_) != HPE_OK) {
      const auto* why = http_errno_description(HTTP_PARSER_ERRNO(&parser_));
      return respond(error_response(400, std::string("bad HTTP request: ") + why), false);
    }
  }

  void dispatch() {
    busy_ = true;
    timer_.cancel();  // a request being served is bounded by its own wait_ms
    complete_ = false;
    request_.method = http_method_str(static_cast<http_method>(parser_.method));
    request_.caller.address = address_;
    const bool keep_alive = http_should_keep_alive(&parser_) != 0;
    pending_ = handlers_.ops->make_pending();
    // The work guard keeps the io thread running until the answer is back, also while the
    // server stops: the completion must never be posted to a finished io_context.
    handle(handlers_, request_, pending_,
           [s = shared_from_this(), keep_alive,
            work = asio::make_work_guard(io_)](HttpResponse response) mutable {
             asio::post(s->io_, [s, keep_alive, response = std::move(response)]() mutable {
               s->respond(std::move(response), keep_alive);
             });
             work.reset();
           });
  }

  void respond(HttpResponse response, bool keep_alive) {
    busy_ = true;
    pending_.reset();
    if (gone_) {
      if (response.undelivered) response.undelivered();
      return;
    }
    keep_alive = keep_alive && !closing_;
    out_ = "HTTP/1.1 " + std::to_string(response.status) + " " + reason(response.status) +
           "\r\nContent-Type: " + response.content_type +
           "\r\nContent-Length: " + std::to_string(response.body.size()) +
           (response.status == 401 ? "\r\nWWW-Authenticate: Bearer realm=\"dlock\"" : "") +
           (keep_alive ? "\r\n\r\n" : "\r\nConnection: close\r\n\r\n") + response.body;
    stream_.async_write(asio::buffer(out_), [s = shared_from_this(), keep_alive,
                                             undelivered = std::move(response.undelivered)](
                                                std::error_code ec, std::size_t) {
      // A write that failed reached nobody; one that succeeded may still be lost with the
      // connection, which the caller cannot tell from a refusal either way (docs/service.md).
      if (ec && undelivered) undelivered();
      if (ec || !keep_alive) {
        std::error_code ignored;
        s->stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
        return s->close();
      }
      s->next();
    });
  }

  // The next request on a kept-alive connection, from the bytes that came meanwhile.
  void next() {
    busy_ = false;
    request_ = HttpRequest{};
    field_.clear();
    in_value_ = false;
    http_parser_pause(&parser_, 0);
    arm();
    if (!input_.empty()) parse();
  }

  std::shared_ptr<asio::ssl::context> tls_;  // kept while the connection lives (SIGHUP)
  ServerStream stream_;
  const HttpHandlers& handlers_;
  asio::io_context& io_;
  http_parser parser_{};
  http_parser_settings settings_{};
  std::array<char, 8192> buffer_{};
  std::string input_;  // received, not parsed yet
  HttpRequest request_;
  std::string field_;  // the header name being read
  bool in_value_ = false;
  std::string address_;  // the client's IP address
  std::string out_;
  std::shared_ptr<PendingAcquire> pending_;
  bool complete_ = false;
  bool too_large_ = false;
  bool busy_ = false;  // a request is being served: later bytes wait in input_
  bool gone_ = false;
  bool closing_ = false;  // the server stops: no keep-alive after this answer
  const std::chrono::milliseconds idle_timeout_;
  asio::steady_timer timer_;
};

HttpServer::~HttpServer() {
  stop();
}

Result<unsigned> HttpServer::start(const std::string& address) {
  const auto colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  std::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (ec) return Error(errc::invalid_argument, "HTTP listen host '" + host + "': " + ec.message());
  const auto port = static_cast<unsigned short>(std::stoul(address.substr(colon + 1)));
  const asio::ip::tcp::endpoint endpoint(ip, port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Error(errc::io_error, "cannot listen on " + address + ": " + ec.message());
  const unsigned bound = acceptor_.local_endpoint().port();
  accept();
  thread_ = std::thread([this] { io_.run(); });
  return bound;
}

void HttpServer::accept() {
  acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      std::erase_if(sessions_, [](const auto& w) { return w.expired(); });
      if (sessions_.size() >= limits_.max_connections) {
        refuse(std::move(socket));
      } else {
        auto session = std::make_shared<HttpSession>(std::move(socket), tls_ ? tls_() : nullptr,
                                                     handlers_, io_, limits_.idle_timeout);
        sessions_.push_back(session);
        session->start();
      }
    }
    accept();
  });
}

void HttpServer::refuse(asio::ip::tcp::socket socket) {
  ++refused_;
  const auto now = std::chrono::steady_clock::now();
  // One line per 10 s at most: a flood of connections must not become a flood of log lines.
  if (refused_logged_ == std::chrono::steady_clock::time_point() ||
      now - refused_logged_ >= std::chrono::seconds(10)) {
    std::cerr << "dlock serve: HTTP connection refused: " << sessions_.size()
              << " open, the limit (--http-max-connections); " << refused_
              << " refused since the last such line" << std::endl;
    refused_logged_ = now;
    refused_ = 0;
  }
  auto s = std::make_shared<asio::ip::tcp::socket>(std::move(socket));
  if (tls_) return;  // no handshake for a refusal: closed (the socket goes with `s`)
  static const std::string kBusy =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Retry-After: 1\r\nConnection: close\r\nContent-Length: 52\r\n\r\n"
      "{\"error\": \"too many connections: retry in a while\"}\n";
  // A few bytes into a fresh socket's send buffer: the write completes at once.
  asio::async_write(*s, asio::buffer(kBusy), [s](std::error_code, std::size_t) {
    std::error_code ignored;
    s->shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    s->close(ignored);
  });
}

void HttpServer::drain() {
  std::erase_if(sessions_, [](const auto& w) { return w.expired(); });
  const bool late = std::chrono::steady_clock::now() >= drain_until_;
  if (sessions_.empty() || late) {
    for (const auto& weak : sessions_) {
      if (auto session = weak.lock()) session->close();
    }
    sessions_.clear();
    return;  // nothing left to run: io_.run() returns once the operations have answered
  }
  drain_timer_.expires_after(std::chrono::milliseconds(20));
  drain_timer_.async_wait([this](std::error_code) { drain(); });
}

void HttpServer::stop() {
  if (!thread_.joinable()) return;
  asio::post(io_, [this] {
    std::error_code ignored;
    acceptor_.close(ignored);
    for (const auto& weak : sessions_) {
      auto session = weak.lock();
      if (!session) continue;
      if (session->idle()) {
        session->close();
      } else {
        session->close_after_answer();
      }
    }
    drain_until_ = std::chrono::steady_clock::now() + limits_.stop_grace;
    drain();
  });
  thread_.join();
}

}  // namespace dlock::service

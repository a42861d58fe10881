// SPDX-License-Identifier: MIT
// The HTTP/1.1 transport of the lock service: Debian's http-parser (nodejs/http-parser 2.9) on
// a standalone asio io_context of its own thread; http_routes.h decides what each request
// does. Keep-alive connections, one request at a time per connection (pipelined requests wait
// their turn). A client that hangs up during an acquisition's wait cancels the wait.
//
// Bounds, so that clients cannot pile sockets up: at most `max_connections` at once (one more
// is answered 503 with Retry-After in the clear, closed at once under TLS, and logged), and a
// connection must complete its TLS handshake and each request within `idle_timeout` of being
// opened or of its previous answer (a slow or silent client is disconnected). A request being
// served (a wait) is not timed by it: `wait_ms` bounds that.
#pragma once

#include <dlock/result.h>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "service/http_routes.h"
#include "service/tls.h"

namespace dlock::service {

inline constexpr std::size_t kMaxBody = 64 * 1024;  // larger: 413

class HttpSession;

struct HttpLimits {
  std::size_t max_connections = 1024;             // open at once; more: 503 (TLS: closed)
  std::chrono::milliseconds idle_timeout{10000};  // to handshake and send a whole request
  std::chrono::milliseconds stop_grace{2000};     // stop(): answers in flight get this long
};

// Where the TLS context of new connections comes from: called at each accept, so that a
// reloaded certificate (SIGHUP) serves new connections while old ones keep theirs.
using TlsSource = std::function<std::shared_ptr<asio::ssl::context>()>;

class HttpServer {
 public:
  // `tls` (none: in the clear) serves every connection over TLS.
  explicit HttpServer(HttpHandlers handlers, TlsSource tls = nullptr, HttpLimits limits = {})
      : handlers_(std::move(handlers)), tls_(std::move(tls)), limits_(limits) {}
  ~HttpServer();  // stops and joins
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Opens HOST:PORT (port 0: any free one) and starts serving on a thread of its own. Returns
  // the port it listens on. Errors: invalid_argument (a bad host), io_error (cannot listen).
  Result<unsigned> start(const std::string& address);
  // Closes the listener, then idle connections at once; a connection whose request is being
  // served gets its answer (with Connection: close) within the limits' stop_grace, then every
  // connection closes and the waits still in flight are cancelled. Returns once every
  // request's operation has completed.
  void stop();

 private:
  void accept();
  void refuse(asio::ip::tcp::socket socket);  // over max_connections
  void drain();                               // stop(): close each connection when it may

  HttpHandlers handlers_;
  TlsSource tls_;
  HttpLimits limits_;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_{io_};
  asio::steady_timer drain_timer_{io_};
  std::chrono::steady_clock::time_point drain_until_;
  std::vector<std::weak_ptr<HttpSession>> sessions_;  // io thread only
  std::size_t refused_ = 0;                           // since the last log line; io thread
  std::chrono::steady_clock::time_point refused_logged_;
  std::thread thread_;
};

}  // namespace dlock::service

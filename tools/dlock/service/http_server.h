// SPDX-License-Identifier: MIT
// The HTTP/1.1 transport of the lock service: Debian's http-parser (nodejs/http-parser 2.9) on
// a standalone asio io_context of its own thread; http_routes.h decides what each request
// does. Keep-alive connections, one request at a time per connection (pipelined requests wait
// their turn). A client that hangs up during an acquisition's wait cancels the wait.
#pragma once

#include <dlock/result.h>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "service/http_routes.h"
#include "service/tls.h"

namespace dlock::service {

inline constexpr std::size_t kMaxBody = 64 * 1024;  // larger: 413

class HttpSession;

class HttpServer {
 public:
  // `tls` (none: in the clear) serves every connection over TLS; it outlives the server.
  explicit HttpServer(HttpHandlers handlers, asio::ssl::context* tls = nullptr)
      : handlers_(std::move(handlers)), tls_(tls) {}
  ~HttpServer();  // stops and joins
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Opens HOST:PORT (port 0: any free one) and starts serving on a thread of its own. Returns
  // the port it listens on. Errors: invalid_argument (a bad host), io_error (cannot listen).
  Result<unsigned> start(const std::string& address);
  // Closes the listener and every connection, cancels the waits in flight, and returns once
  // every request's operation has completed.
  void stop();

 private:
  void accept();

  HttpHandlers handlers_;
  asio::ssl::context* tls_;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_{io_};
  std::vector<std::weak_ptr<HttpSession>> sessions_;  // io thread only
  std::thread thread_;
};

}  // namespace dlock::service

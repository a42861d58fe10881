// SPDX-License-Identifier: MIT
// The lock service's TLS (`--tls-cert`, `--tls-key`, `--tls-client-ca`; docs/service.md): the
// PEM files read and checked at start (a bad file is a usage error, not a listener that fails
// later) and on SIGHUP (service/reload.h), for both listeners: gRPC takes the PEM text
// (service/grpc_tls.h), HTTP an OpenSSL context (asio::ssl) and ServerStream, the connection's
// bytes in the clear or over TLS behind one interface, as src/net/connection.cc's client stream
// does.
#pragma once

#include <dlock/result.h>

#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/ssl.hpp>
#include <asio/write.hpp>
#include <memory>
#include <string>
#include <utility>

namespace dlock::service {

class ServerTls {
 public:
  // The files of the flags (cert and key both, or neither; a client CA only with them).
  // Nothing given: no TLS (nullptr). Errors: invalid_argument, naming the flag and the file.
  static Result<std::shared_ptr<ServerTls>> load(const std::string& cert_file,
                                                 const std::string& key_file,
                                                 const std::string& client_ca_file);

  const std::string& cert_pem() const noexcept { return cert_; }
  const std::string& key_pem() const noexcept { return key_; }
  const std::string& client_ca_pem() const noexcept { return client_ca_; }  // "": none required
  asio::ssl::context& context() noexcept { return context_; }

 private:
  ServerTls() = default;
  Result<bool> configure(const std::string& cert_file, const std::string& key_file,
                         const std::string& client_ca_file);

  std::string cert_;
  std::string key_;
  std::string client_ca_;
  asio::ssl::context context_{asio::ssl::context::tls_server};
};

// A server connection's byte stream: the TCP socket, or TLS over it. Not movable (the TLS
// stream refers to the socket).
class ServerStream {
 public:
  ServerStream(asio::ip::tcp::socket socket, asio::ssl::context* tls) : socket_(std::move(socket)) {
    if (tls != nullptr)
      ssl_ = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket&>>(socket_, *tls);
  }
  ServerStream(const ServerStream&) = delete;
  ServerStream& operator=(const ServerStream&) = delete;

  asio::ip::tcp::socket& socket() noexcept { return socket_; }

  // TLS: the server's side of the handshake (a client certificate checked here when one is
  // required). In the clear: done, posted.
  template <typename Handler>
  void async_handshake(Handler&& handler) {
    if (ssl_)
      return ssl_->async_handshake(asio::ssl::stream_base::server, std::forward<Handler>(handler));
    asio::post(socket_.get_executor(),
               [h = std::forward<Handler>(handler)]() mutable { h(std::error_code()); });
  }
  template <typename Handler>
  void async_read_some(asio::mutable_buffer buffer, Handler&& handler) {
    if (ssl_) return ssl_->async_read_some(buffer, std::forward<Handler>(handler));
    socket_.async_read_some(buffer, std::forward<Handler>(handler));
  }
  template <typename Handler>
  void async_write(asio::const_buffer buffer, Handler&& handler) {
    if (ssl_) return asio::async_write(*ssl_, buffer, std::forward<Handler>(handler));
    asio::async_write(socket_, buffer, std::forward<Handler>(handler));
  }

 private:
  asio::ip::tcp::socket socket_;
  std::unique_ptr<asio::ssl::stream<asio::ip::tcp::socket&>> ssl_;
};

}  // namespace dlock::service

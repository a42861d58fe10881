// SPDX-License-Identifier: MIT
// The gRPC listener's TLS (docs/service.md, "TLS" and "Reloading tokens and certificates"):
// server credentials that ask, at each new connection's handshake, for the newest good
// configuration (the one read at start, or by the last good SIGHUP), so that a reload serves the
// gRPC connections opened after it, as it does HTTPS's; open connections keep the certificate
// they began with.
//
// gRPC 1.51's C++ API has no credentials whose certificate can be replaced: SslServerCredentials
// is fixed at start, and TlsServerCredentials' only reloading provider watches the files on a
// timer (whatever is on disk at that moment, a file still being written included, rather than
// what the service checked on SIGHUP). gRPC's C API has what is needed: SSL server credentials with
// a certificate config fetcher (grpc_ssl_server_credentials_create_options_using_config_fetcher),
// called before each handshake; the service answers it with the PEM text the reload has already
// checked with OpenSSL (ServerTls::load), and "unchanged" until the next good reload.
#pragma once

#include <grpc/grpc_security.h>
#include <grpcpp/security/server_credentials.h>

#include <functional>
#include <memory>
#include <mutex>

#include "service/tls.h"

namespace dlock::service {

class GrpcTls {
 public:
  // The newest good configuration; null: no TLS. Called before each gRPC handshake.
  using Source = std::function<std::shared_ptr<ServerTls>()>;

  explicit GrpcTls(Source source) : source_(std::move(source)) {}
  GrpcTls(const GrpcTls&) = delete;
  GrpcTls& operator=(const GrpcTls&) = delete;

  // Credentials for the gRPC listener: in the clear when the source has no TLS, else TLS with
  // its certificate (and a client certificate required when it has a client CA). This object
  // must outlive the server they are given to (gRPC calls it at each handshake).
  std::shared_ptr<grpc::ServerCredentials> credentials();

 private:
  static grpc_ssl_certificate_config_reload_status fetch(
      void* self, grpc_ssl_server_certificate_config** config);

  Source source_;
  std::mutex mu_;
  std::shared_ptr<ServerTls> served_;  // the configuration gRPC last took; guarded by mu_
};

}  // namespace dlock::service

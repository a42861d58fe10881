// SPDX-License-Identifier: MIT
// SIGHUP for `dlock serve` (docs/service.md, "Reloading tokens and certificates"): the token
// file and the TLS files read again without a restart. New tokens serve the calls that come
// after; a removed token is refused from then on. New certificates (and client CA) serve the
// HTTPS and gRPC connections opened after (open ones keep theirs; gRPC asks for the newest at
// each handshake, service/grpc_tls.h). A file that cannot be read or is bad keeps the whole
// previous configuration of its kind and is logged (`FILE:LINE: why`, never a token): a reload
// never leaves the service open, nor without its certificate.
#pragma once

#include <memory>
#include <mutex>

#include "service/guard.h"
#include "service/http_server.h"
#include "service/security_flags.h"
#include "service/tls.h"

namespace dlock::cli {

class Reloader {
 public:
  // `flags` and `guard` outlive it; `tls` is the configuration of the start (null: none).
  Reloader(const SecurityFlags& flags, service::Guard& guard,
           std::shared_ptr<service::ServerTls> tls)
      : flags_(flags), guard_(guard), tls_(std::move(tls)) {}

  // The HTTP listener's source of TLS contexts: the newest good one (null without TLS).
  service::TlsSource http_tls();
  // The newest good TLS configuration (null without TLS), for the gRPC listener's handshakes.
  std::shared_ptr<service::ServerTls> tls();
  // Reads the files again; says on stderr what it did, or why it kept the old. Thread-safe.
  void reload();

 private:
  void reload_tokens();
  void reload_tls();

  const SecurityFlags& flags_;
  service::Guard& guard_;
  std::mutex mu_;
  std::shared_ptr<service::ServerTls> tls_;  // guarded by mu_
};

}  // namespace dlock::cli

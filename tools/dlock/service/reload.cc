// SPDX-License-Identifier: MIT
#include "service/reload.h"

#include <iostream>

namespace dlock::cli {

service::TlsSource Reloader::http_tls() {
  {
    std::lock_guard lock(mu_);
    if (!tls_) return nullptr;
  }
  return [this]() -> std::shared_ptr<asio::ssl::context> {
    std::lock_guard lock(mu_);
    // The context lives as long as its ServerTls: a connection keeps the one it began with.
    return std::shared_ptr<asio::ssl::context>(tls_, &tls_->context());
  };
}

std::shared_ptr<service::ServerTls> Reloader::tls() {
  std::lock_guard lock(mu_);
  return tls_;
}

void Reloader::reload() {
  if (flags_.tokens.empty() && flags_.tls_cert.empty()) {
    std::cerr << "dlock serve: SIGHUP: no --tokens and no TLS files to read again" << std::endl;
    return;
  }
  if (!flags_.tokens.empty()) reload_tokens();
  if (!flags_.tls_cert.empty()) reload_tls();
}

void Reloader::reload_tokens() {
  auto tokens = service::Tokens::load(flags_.tokens);
  if (!tokens) {
    // Tokens::load's messages name the file and line, never a token.
    std::cerr << "dlock serve: SIGHUP: --tokens: " << tokens.error().message()
              << "; the previous tokens stay in force" << std::endl;
    return;
  }
  const std::size_t count = tokens->size();
  guard_.replace_tokens(std::move(*tokens));
  std::cerr << "dlock serve: SIGHUP: " << count << " tokens read from " << flags_.tokens
            << std::endl;
}

void Reloader::reload_tls() {
  auto tls = load_tls(flags_);
  if (!tls || !*tls) {
    std::cerr << "dlock serve: SIGHUP: "
              << (tls ? std::string("no TLS files") : tls.error().message())
              << "; the previous certificate stays in force" << std::endl;
    return;
  }
  {
    std::lock_guard lock(mu_);
    tls_ = std::move(*tls);
  }
  std::cerr << "dlock serve: SIGHUP: TLS certificate read again from " << flags_.tls_cert
            << (flags_.tls_client_ca.empty() ? ""
                                             : " (client CA from " + flags_.tls_client_ca + ")")
            << ": it serves the HTTPS and gRPC connections opened from now on" << std::endl;
}

}  // namespace dlock::cli

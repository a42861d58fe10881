// SPDX-License-Identifier: MIT
#include "service/security_flags.h"

#include "duration.h"

namespace dlock::cli {

void add_security_flags(CLI::App& serve, SecurityFlags& flags) {
  serve.add_option("--tls-cert", flags.tls_cert,
                   "the service's certificate chain (PEM): both listeners serve TLS");
  serve.add_option("--tls-key", flags.tls_key, "the private key (PEM) of --tls-cert");
  serve.add_option("--tls-client-ca", flags.tls_client_ca,
                   "CA certificates (PEM): clients must show a certificate signed by one "
                   "(mutual TLS, both listeners)");
  serve.add_option("--tokens", flags.tokens,
                   "FILE of bearer tokens, one a line: TOKEN PREFIX... (`*`: every name); "
                   "each request then needs `Authorization: Bearer TOKEN`");
  serve.add_option("--max-ttl", flags.max_ttl,
                   "the longest ttl a request may ask for (default 10m); extend to hold longer");
  serve.add_option("--max-wait", flags.max_wait,
                   "the longest wait a request may ask for (default 10m)");
  serve.add_option("--max-waits", flags.max_waits,
                   "waits in flight per token (per client address without --tokens); more "
                   "are refused, retryably (default 256)");
}

namespace {

Result<std::chrono::milliseconds> positive_duration(const char* flag, const std::string& text) {
  auto d = parse_duration(text);
  if (!d) return Error(errc::invalid_argument, std::string(flag) + ": " + d.error().message());
  if (d->count() <= 0) {
    return Error(errc::invalid_argument, std::string(flag) + " must be positive, got " + text);
  }
  return d;
}

}  // namespace

Result<service::Limits> limits_of(const SecurityFlags& flags) {
  service::Limits limits;
  auto max_ttl = positive_duration("--max-ttl", flags.max_ttl);
  if (!max_ttl) return max_ttl.error();
  auto max_wait = positive_duration("--max-wait", flags.max_wait);
  if (!max_wait) return max_wait.error();
  if (flags.max_waits == 0) return Error(errc::invalid_argument, "--max-waits must be positive");
  limits.max_ttl = *max_ttl;
  limits.max_wait = *max_wait;
  limits.max_waits = flags.max_waits;
  return limits;
}

Result<service::Guard> make_guard(const SecurityFlags& flags) {
  auto limits = limits_of(flags);
  if (!limits) return limits.error();
  std::optional<service::Tokens> tokens;
  if (!flags.tokens.empty()) {
    auto loaded = service::Tokens::load(flags.tokens);
    if (!loaded) return Error(errc::invalid_argument, "--tokens: " + loaded.error().message());
    tokens = std::move(*loaded);
  }
  return service::Guard(std::move(tokens), *limits);
}

Result<std::shared_ptr<service::ServerTls>> load_tls(const SecurityFlags& flags) {
  return service::ServerTls::load(flags.tls_cert, flags.tls_key, flags.tls_client_ca);
}

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// `dlock serve`'s security and limit flags (docs/service.md): TLS, bearer tokens, and the
// maxima of a request; read and checked before the service starts, so that a bad file or value
// is a usage error (exit 64) rather than a service that runs without what was asked for.
#pragma once

#include <dlock/result.h>

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "service/guard.h"
#include "service/tls.h"

namespace dlock::cli {

struct SecurityFlags {
  std::string tls_cert;       // the service's certificate (PEM)
  std::string tls_key;        // its key
  std::string tls_client_ca;  // clients must show a certificate signed by this CA
  std::string tokens;         // bearer tokens and the name prefixes each may use
  std::string max_ttl = "10m";
  std::string max_wait = "10m";
  std::size_t max_waits = service::Limits{}.max_waits;
};

void add_security_flags(CLI::App& serve, SecurityFlags& flags);

// The limits of the flags. Errors: invalid_argument (a bad duration, 0).
Result<service::Limits> limits_of(const SecurityFlags& flags);
// The guard of the flags: the token file read and checked, and the limits. Errors:
// invalid_argument, saying which flag, file and line.
Result<service::Guard> make_guard(const SecurityFlags& flags);
// The TLS of the flags, files read and checked (nullptr: none asked for). Errors:
// invalid_argument (one of cert and key only, a client CA without them, a bad or unreadable file).
Result<std::shared_ptr<service::ServerTls>> load_tls(const SecurityFlags& flags);

}  // namespace dlock::cli

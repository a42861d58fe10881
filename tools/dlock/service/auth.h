// SPDX-License-Identifier: MIT
// Bearer tokens of the lock service (`dlock serve --tokens FILE`, docs/service.md): the token
// file, and who a request's `Authorization: Bearer TOKEN` is and which names it may use.
//
// The file, one token a line:   TOKEN PREFIX [PREFIX...]   (`*`: every name; `#` comments)
// Only a SHA-256 digest of each token is kept, and a request's token is compared with every
// entry's digest in constant time, so neither the time nor memory tells a token. No message
// here ever contains a token.
#pragma once

#include <dlock/result.h>

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "service/operations.h"

namespace dlock::service {

// Shorter tokens are refused when the file is read: a guessable token protects nothing.
inline constexpr std::size_t kMinTokenLength = 16;

class Tokens {
 public:
  // The text of a token file; `source` names it in errors, which say `source:LINE: why`.
  // Errors: invalid_argument (a bad line, a token twice, no token at all).
  static Result<Tokens> parse(std::string_view text, const std::string& source);
  // Reads and parses the file. Errors: invalid_argument (unreadable, or as parse()).
  static Result<Tokens> load(const std::string& path);

  std::size_t size() const noexcept { return entries_.size(); }

  // Which entry the `Authorization` value (HTTP header or gRPC metadata; empty when there is
  // none) is: `Bearer TOKEN`, the scheme in any case. UNAUTHENTICATED when it has no bearer
  // token or one the file does not have.
  Outcome<std::size_t> authenticate(std::string_view authorization) const;
  // PERMISSION_DENIED unless `name` starts with one of the entry's prefixes.
  std::optional<Failure> authorize(std::size_t entry, std::string_view name) const;
  // What names the entry in logs and counters, never the token: "sha256:" and the first 12
  // hex digits of its digest (stable across reloads; a line number is not).
  std::string id(std::size_t entry) const;

 private:
  using Digest = std::array<unsigned char, 32>;
  struct Entry {
    Digest digest{};
    std::vector<std::string> prefixes;  // empty: every name (`*`)
  };
  static Digest digest(std::string_view token);
  std::optional<std::size_t> find(std::string_view token) const;

  std::vector<Entry> entries_;
};

// The token of an `Authorization` value, or "" when it is not `Bearer TOKEN`. Pure.
std::string_view bearer_token(std::string_view authorization);

}  // namespace dlock::service

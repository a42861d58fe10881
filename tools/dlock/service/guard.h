// SPDX-License-Identifier: MIT
// What every call to the lock service passes before it reaches the operations, whatever the
// transport: its bearer token and the name's prefix (auth.h, with --tokens), and the limits
// (limits.h). Checked in this order: the token (UNAUTHENTICATED: an unknown caller learns
// nothing more), the input's limits (INVALID_ARGUMENT), the name's prefix
// (PERMISSION_DENIED), then a place among the caller's concurrent waits (RESOURCE_EXHAUSTED).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "service/auth.h"
#include "service/limits.h"
#include "service/operations.h"

namespace dlock::service {

// Who calls: the `Authorization` value (HTTP header or gRPC metadata `authorization`; empty
// when none) and the client's IP address (which counts its waits when there are no tokens).
struct Caller {
  std::string authorization;
  std::string address;
};

class Guard {
 public:
  // No tokens: every caller may use every name.
  Guard(std::optional<Tokens> tokens, Limits limits);

  const Limits& limits() const noexcept { return limits_; }
  bool has_tokens() const noexcept { return has_tokens_; }
  // SIGHUP: `tokens` replace the file's earlier ones for every later call (a call already
  // admitted goes on). Thread-safe. Without tokens at start, there are none to replace: false.
  bool replace_tokens(Tokens tokens);
  // The id of the caller's token (Tokens::id), "" when there are no tokens or it is unknown.
  std::string token_id(const Caller& caller) const;

  // A call on `name` (Release, Status).
  std::optional<Failure> check(const Caller& caller, std::string_view name) const;
  // An Extend: check() and its ttl (unset: kDefaultTtl) against the maximum.
  std::optional<Failure> check_extend(const Caller& caller, std::string_view name,
                                      std::optional<std::int64_t> ttl_ms) const;
  // A call on no name (HTTP /metrics): any known token.
  std::optional<Failure> check_token(const Caller& caller) const;
  // An Acquire: check(), the wait's maximum, and for a wait (wait_ms > 0) one of the caller's
  // places, held until the slot goes (an empty slot for a try).
  Outcome<WaitCounter::Slot> admit(const Caller& caller, const AcquireInput& in);

 private:
  // The token, the name's length, the ttl (if the call asks for one), then the prefix.
  std::optional<Failure> check_call(const Caller& caller, std::string_view name,
                                    std::optional<std::int64_t> ttl_ms) const;
  // The caller's identity for counting waits: its token's entry, else its address.
  Outcome<std::string> identify(const Caller& caller) const;

  // The tokens of now; a call works on the snapshot it took (replace_tokens swaps it).
  std::shared_ptr<const Tokens> tokens() const;

  struct TokenSet {
    std::mutex mu;
    std::shared_ptr<const Tokens> current;  // guarded by mu
  };
  bool has_tokens_;
  std::shared_ptr<TokenSet> tokens_;  // shared: a Guard is moved out of make_guard()
  Limits limits_;
  WaitCounter waits_;
};

// Wraps `done` so that `slot` is given back just before `done` runs (so that a caller that
// waits again as soon as it hears finds its place free), or when the wrapper is dropped.
template <typename T>
std::function<void(T)> holding(WaitCounter::Slot slot, std::function<void(T)> done) {
  if (!slot) return done;
  return [slot = std::move(slot), done = std::move(done)](T outcome) mutable {
    slot.reset();
    done(std::move(outcome));
  };
}

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
#include "service/guard.h"

namespace dlock::service {

Guard::Guard(std::optional<Tokens> tokens, Limits limits)
    : has_tokens_(tokens.has_value()),
      tokens_(std::make_shared<TokenSet>()),
      limits_(limits),
      waits_(limits.max_waits) {
  if (tokens) tokens_->current = std::make_shared<const Tokens>(std::move(*tokens));
}

std::shared_ptr<const Tokens> Guard::tokens() const {
  std::lock_guard lock(tokens_->mu);
  return tokens_->current;
}

bool Guard::replace_tokens(Tokens tokens) {
  if (!has_tokens_) return false;
  auto fresh = std::make_shared<const Tokens>(std::move(tokens));
  std::lock_guard lock(tokens_->mu);
  tokens_->current = std::move(fresh);
  return true;
}

std::string Guard::token_id(const Caller& caller) const {
  const auto now = tokens();
  if (!now) return "";
  auto entry = now->authenticate(caller.authorization);
  if (std::holds_alternative<Failure>(entry)) return "";
  return now->id(std::get<std::size_t>(entry));
}

Outcome<std::string> Guard::identify(const Caller& caller) const {
  const auto now = tokens();
  if (!now) return "address " + caller.address;
  auto entry = now->authenticate(caller.authorization);
  if (auto* f = std::get_if<Failure>(&entry)) return *f;
  // By id, not by line: a reloaded file keeps a token's waits counted as its own.
  return "token " + now->id(std::get<std::size_t>(entry));
}

std::optional<Failure> Guard::check_token(const Caller& caller) const {
  auto who = identify(caller);
  if (auto* f = std::get_if<Failure>(&who)) return *f;
  return std::nullopt;
}

std::optional<Failure> Guard::check_call(const Caller& caller, std::string_view name,
                                         std::optional<std::int64_t> ttl_ms) const {
  std::optional<std::size_t> entry;
  const auto now = tokens();
  if (now) {
    auto known = now->authenticate(caller.authorization);
    if (auto* f = std::get_if<Failure>(&known)) return *f;
    entry = std::get<std::size_t>(known);
  }
  if (auto bad = check_name_limit(limits_, name)) return bad;
  if (ttl_ms) {
    if (auto bad = check_ttl_limit(limits_, *ttl_ms)) return bad;
  }
  return entry ? now->authorize(*entry, name) : std::nullopt;
}

std::optional<Failure> Guard::check(const Caller& caller, std::string_view name) const {
  return check_call(caller, name, std::nullopt);
}

std::optional<Failure> Guard::check_extend(const Caller& caller, std::string_view name,
                                           std::optional<std::int64_t> ttl_ms) const {
  return check_call(caller, name, ttl_ms.value_or(kDefaultTtl.count()));
}

Outcome<WaitCounter::Slot> Guard::admit(const Caller& caller, const AcquireInput& in) {
  auto who = identify(caller);
  if (auto* f = std::get_if<Failure>(&who)) return *f;
  if (auto bad = check_wait_limit(limits_, in.wait_ms)) return *bad;
  if (auto bad = check_call(caller, in.name, in.ttl_ms.value_or(kDefaultTtl.count()))) {
    return *bad;
  }
  if (in.wait_ms <= 0) return WaitCounter::Slot();
  return waits_.enter(std::get<std::string>(who));
}

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
#include "service/guard.h"

namespace dlock::service {

Outcome<std::string> Guard::identify(const Caller& caller) const {
  if (!tokens_) return "address " + caller.address;
  auto entry = tokens_->authenticate(caller.authorization);
  if (auto* f = std::get_if<Failure>(&entry)) return *f;
  return "token " + std::to_string(std::get<std::size_t>(entry));
}

std::optional<Failure> Guard::check_token(const Caller& caller) const {
  auto who = identify(caller);
  if (auto* f = std::get_if<Failure>(&who)) return *f;
  return std::nullopt;
}

std::optional<Failure> Guard::check_call(const Caller& caller, std::string_view name,
                                         std::optional<std::int64_t> ttl_ms) const {
  std::optional<std::size_t> entry;
  if (tokens_) {
    auto known = tokens_->authenticate(caller.authorization);
    if (auto* f = std::get_if<Failure>(&known)) return *f;
    entry = std::get<std::size_t>(known);
  }
  if (auto bad = check_name_limit(limits_, name)) return bad;
  if (ttl_ms) {
    if (auto bad = check_ttl_limit(limits_, *ttl_ms)) return bad;
  }
  return entry ? tokens_->authorize(*entry, name) : std::nullopt;
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

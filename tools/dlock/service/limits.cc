// SPDX-License-Identifier: MIT
#include "service/limits.h"

namespace dlock::service {

std::optional<Failure> check_name_limit(const Limits& limits, std::string_view name) {
  if (name.empty()) return Failure{Code::invalid_argument, "name must not be empty"};
  if (name.size() > limits.max_name_bytes) {
    return Failure{Code::invalid_argument, "name is " + std::to_string(name.size()) +
                                               " bytes, over the maximum of " +
                                               std::to_string(limits.max_name_bytes)};
  }
  return std::nullopt;
}

std::optional<Failure> check_ttl_limit(const Limits& limits, std::int64_t ttl_ms) {
  if (ttl_ms > limits.max_ttl.count()) {
    return Failure{Code::invalid_argument,
                   "ttl_ms " + std::to_string(ttl_ms) + " is over the maximum of " +
                       std::to_string(limits.max_ttl.count()) +
                       " (dlock serve --max-ttl); extend a lease to hold it longer"};
  }
  return std::nullopt;
}

std::optional<Failure> check_wait_limit(const Limits& limits, std::int64_t wait_ms) {
  if (wait_ms > limits.max_wait.count()) {
    return Failure{Code::invalid_argument,
                   "wait_ms " + std::to_string(wait_ms) + " is over the maximum of " +
                       std::to_string(limits.max_wait.count()) + " (dlock serve --max-wait)"};
  }
  return std::nullopt;
}

struct WaitCounter::State {
  std::mutex mu;
  std::map<std::string, std::size_t> waiting;  // callers with at least one wait; guarded by mu
  std::size_t max = 0;
};

WaitCounter::WaitCounter(std::size_t max) : state_(std::make_shared<State>()) {
  state_->max = max;
}

Outcome<WaitCounter::Slot> WaitCounter::enter(const std::string& caller) {
  std::lock_guard lock(state_->mu);
  std::size_t& count = state_->waiting[caller];
  if (count >= state_->max) {
    if (count == 0) state_->waiting.erase(caller);  // max 0: no entry left behind
    return Failure{Code::resource_exhausted,
                   "this caller already has " + std::to_string(state_->max) +
                       " waits in flight (dlock serve --max-waits): retry when one ends"};
  }
  ++count;
  // The slot's deleter gives the place back; the caller's entry goes with its last wait.
  return Slot(static_cast<void*>(state_.get()), [state = state_, caller](void*) {
    std::lock_guard held(state->mu);
    auto it = state->waiting.find(caller);
    if (it != state->waiting.end() && --it->second == 0) state->waiting.erase(it);
  });
}

std::size_t WaitCounter::waiting(const std::string& caller) const {
  std::lock_guard lock(state_->mu);
  const auto it = state_->waiting.find(caller);
  return it == state_->waiting.end() ? 0 : it->second;
}

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
#include "lock/tally.h"

#include <algorithm>

#include "lock/validity.h"

namespace dlock::lock {
namespace {

std::optional<std::int64_t> int_at(const resp::Reply& r, std::size_t i) {
  if (!r.is_array() || r.elements.size() <= i || !r.elements[i].is_integer()) return std::nullopt;
  return r.elements[i].integer;
}

// The error of an outcome that is not a usable reply.
Error failure(const Result<resp::Reply>& outcome, const char* what) {
  if (!outcome) return outcome.error();
  if (outcome->is_error()) return Error(errc::script_error, outcome->str);
  return Error(errc::protocol_error, std::string("unexpected reply to ") + what);
}

// Durations a node reports are capped at ten years before any deadline is computed from them:
// a value left by an older client (which accepted any ttl) must not overflow a time_point.
std::chrono::milliseconds node_duration(std::int64_t ms) {
  constexpr std::int64_t kTenYears = std::int64_t{10} * 365 * 24 * 3600 * 1000;
  return std::chrono::milliseconds(std::min(ms, kTenYears));
}

}  // namespace

AcquireReply parse_acquire(const Result<resp::Reply>& outcome) {
  AcquireReply reply;
  const auto status = outcome ? int_at(*outcome, 0) : std::nullopt;
  const auto fence = outcome ? int_at(*outcome, 1) : std::nullopt;
  const auto detail = outcome ? int_at(*outcome, 2) : std::nullopt;
  if (!status || !fence || !detail || *fence < 0 || *status < -1 || *status > 1 ||
      (*status == -1 && *detail <= 0)) {
    reply.error = failure(outcome, "acquire");
    return reply;
  }
  if (*status == -1) {
    reply.kind = AcquireReply::Kind::mismatch;
    reply.counter = static_cast<std::uint64_t>(*fence);
    reply.permits = *detail;
    return reply;
  }
  reply.kind = *status == 1 ? AcquireReply::Kind::granted : AcquireReply::Kind::held;
  reply.counter = static_cast<std::uint64_t>(*fence);
  reply.holder_ttl = *detail;
  reply.writer_registered = int_at(*outcome, 3) == std::optional<std::int64_t>(1);
  return reply;
}

AcquireTally tally_acquire(const std::vector<AcquireReply>& replies, const std::vector<bool>& votes,
                           std::size_t quorum) {
  AcquireTally t;
  for (const auto& r : replies) {
    t.writer_registered = t.writer_registered || r.writer_registered;
    if (r.kind == AcquireReply::Kind::granted) t.token = std::max(t.token, r.counter);
    // A refusing node's counter may be the current holder's token: ours must be larger.
    if (r.kind == AcquireReply::Kind::held) t.token = std::max(t.token, r.counter + 1);
    if (r.kind == AcquireReply::Kind::mismatch) t.recorded_permits = r.permits;
  }
  std::size_t holding = 0;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    const auto& r = replies[i];
    if (r.kind == AcquireReply::Kind::granted && votes[i]) {
      ++t.granted;
      if (r.counter == t.token) ++holding;
    } else if (r.kind == AcquireReply::Kind::held) {
      ++t.held;
      if (r.holder_ttl >= 0) {
        t.holder_ttl = std::max(t.holder_ttl.value_or(std::chrono::milliseconds(0)),
                                node_duration(r.holder_ttl));
      }
    }
  }
  t.token_on_quorum = holding >= quorum;
  return t;
}

ReleaseReply parse_release(const Result<resp::Reply>& outcome) {
  ReleaseReply reply;
  const auto status = outcome ? int_at(*outcome, 0) : std::nullopt;
  const auto listeners = outcome ? int_at(*outcome, 1) : std::nullopt;
  if (!status || !listeners || (*status != 0 && *status != 1)) {
    reply.error = failure(outcome, "release");
    return reply;
  }
  reply.kind = *status == 1 ? ReleaseReply::Kind::freed : ReleaseReply::Kind::not_held;
  reply.listeners = *listeners;
  return reply;
}

RenewReply parse_renew(const Result<resp::Reply>& outcome, std::size_t slot) {
  const auto answer = outcome ? int_at(*outcome, slot) : std::nullopt;
  if (!answer) return RenewReply::failed;
  return *answer == 1 ? RenewReply::renewed : RenewReply::not_held;
}

Extension judge_extension(std::size_t extended, std::size_t errors, std::size_t quorum,
                          std::chrono::milliseconds ttl, double drift_factor,
                          std::chrono::steady_clock::time_point start,
                          std::chrono::steady_clock::time_point now,
                          std::chrono::steady_clock::time_point valid_until) {
  if (now >= valid_until) return extended + errors < quorum ? Extension::lost : Extension::expired;
  if (extended >= quorum && validity(ttl, now - start, drift_factor).count() > 0) {
    return Extension::extended;
  }
  // Nodes that did not answer may still hold it: too few answers is not a loss yet.
  return extended + errors >= quorum ? Extension::no_quorum : Extension::lost;
}

BootReport tally_hello(const std::vector<Result<resp::Reply>>& replies, std::size_t greeted) {
  BootReport report;
  report.boot_age.resize(greeted);
  for (const auto& r : replies) {
    if (!r || !r->is_array() || r->elements.size() != greeted + 1) continue;
    const auto max_ttl = int_at(*r, 0);
    if (!max_ttl) continue;
    ++report.told;
    report.max_ttl = std::max(report.max_ttl, node_duration(*max_ttl));
    for (std::size_t k = 0; k < greeted; ++k) {
      const auto age = int_at(*r, k + 1);
      if (!age || *age < 0) continue;
      auto& shortest = report.boot_age[k];
      shortest = std::min(shortest.value_or(std::chrono::milliseconds::max()),
                          std::chrono::milliseconds(*age));
    }
  }
  return report;
}

}  // namespace dlock::lock

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
  if (outcome->is_error()) return Error(errc::script_error, script_error_text(outcome->str));
  return Error(errc::protocol_error, std::string("unexpected reply to ") + what);
}

// Durations a node reports are capped at ten years before any deadline is computed from them:
// a value left by an older client (which accepted any ttl) must not overflow a time_point.
std::chrono::milliseconds node_duration(std::int64_t ms) {
  constexpr std::int64_t kTenYears = std::int64_t{10} * 365 * 24 * 3600 * 1000;
  return std::chrono::milliseconds(std::min(ms, kTenYears));
}

}  // namespace

std::string script_error_text(const std::string& server_text) {
  if (server_text.find("WRONGTYPE") == std::string::npos) return server_text;
  return server_text +
         " (a key of dlock's (dlock:max-ttl, dlock:fence-floor, dlock:boots, or one of the "
         "name's dlock:...:{NAME} keys) holds a value of another type on this node: something "
         "other than dlock wrote it; dlock refuses the node until it is deleted)";
}

AcquireReply parse_acquire(const Result<resp::Reply>& outcome) {
  AcquireReply reply;
  // acquire.lua answers a grant with the bare token (fair_acquire.lua with {1, token, 0}).
  if (outcome && outcome->is_integer()) {
    if (outcome->integer <= 0) {
      reply.error = failure(outcome, "acquire");
      return reply;
    }
    reply.kind = AcquireReply::Kind::granted;
    reply.counter = static_cast<std::uint64_t>(outcome->integer);
    reply.holder_ttl = 0;
    return reply;
  }
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
    if (r.kind == AcquireReply::Kind::granted && r.counter < t.token) t.granted_below = true;
    if (r.kind == AcquireReply::Kind::granted && votes[i]) {
      ++t.granted;
      if (r.counter == t.token) ++holding;
    } else if (r.kind == AcquireReply::Kind::held) {
      ++t.held;
      if (r.holder_ttl >= 0) {
        t.holder_ttl = std::max(t.holder_ttl.value_or(std::chrono::milliseconds(0)),
                                node_duration(r.holder_ttl));
      } else if (r.holder_ttl == -1) {
        t.holder_without_ttl = true;
      }
    }
  }
  t.token_on_quorum = holding >= quorum;
  return t;
}

std::vector<bool> granting_voters(const std::vector<AcquireReply>& replies,
                                  const std::vector<bool>& votes) {
  std::vector<bool> granting(replies.size());
  for (std::size_t i = 0; i < replies.size(); ++i) {
    granting[i] = replies[i].kind == AcquireReply::Kind::granted && votes[i];
  }
  return granting;
}

// release.lua: n >= 0 freed (n listened), -1 not held.
ReleaseReply parse_release(const Result<resp::Reply>& outcome) {
  ReleaseReply reply;
  if (!outcome || !outcome->is_integer() || outcome->integer < -1) {
    reply.error = failure(outcome, "release");
    return reply;
  }
  reply.kind = outcome->integer >= 0 ? ReleaseReply::Kind::freed : ReleaseReply::Kind::not_held;
  reply.listeners = std::max<std::int64_t>(outcome->integer, 0);
  return reply;
}

bool release_freed(const resp::Reply& reply) {
  return reply.is_integer() && reply.integer >= 0;
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

BootReport tally_hello(const std::vector<Result<resp::Reply>>& replies,
                       const std::vector<std::size_t>& greeted) {
  BootReport report;
  const std::size_t n = greeted.size();
  report.boot_age.resize(n);
  report.age_by_others.resize(n);
  report.answered.resize(n);
  report.in_use.resize(n);
  const auto shorter = [](std::optional<std::chrono::milliseconds>& shortest, std::int64_t age) {
    shortest = std::min(shortest.value_or(std::chrono::milliseconds::max()),
                        std::chrono::milliseconds(age));
  };
  report.floors.resize(replies.size());
  for (std::size_t node = 0; node < replies.size(); ++node) {
    const auto& r = replies[node];
    if (!r || !r->is_array() || r->elements.size() != n + 3) continue;
    const auto max_ttl = int_at(*r, 0);
    const auto in_use = int_at(*r, 1);
    const auto floor = int_at(*r, n + 2);
    if (!max_ttl || !in_use || !floor) continue;
    ++report.told;
    report.floors[node] = static_cast<std::uint64_t>(std::max<std::int64_t>(*floor, 0));
    report.largest_floor = std::max(report.largest_floor, report.floors[node]);
    report.max_ttl = std::max(report.max_ttl, node_duration(*max_ttl));
    report.any_in_use = report.any_in_use || *in_use == 1;
    for (std::size_t k = 0; k < n; ++k) {
      if (greeted[k] == node) {
        report.answered[k] = true;
        report.in_use[k] = *in_use == 1;
      }
      const auto age = int_at(*r, k + 2);
      if (!age || *age < 0) continue;
      shorter(report.boot_age[k], *age);
      if (greeted[k] != node) shorter(report.age_by_others[k], *age);
    }
  }
  return report;
}

GreetingVerdict judge_greeting(const BootReport& report, std::size_t nodes, std::size_t quorum,
                               bool start_from_quorum) {
  GreetingVerdict verdict;
  verdict.brand_new = !report.any_in_use;
  for (std::size_t k = 0; k < report.answered.size(); ++k) {
    if (!report.answered[k]) continue;
    const auto& seen = report.age_by_others[k];
    if (report.in_use[k]) {
      if (!seen || *seen >= report.max_ttl) ++verdict.counted;
    } else if (!seen) {
      ++verdict.fresh;
    }
  }
  if (report.told < quorum) return verdict;
  if (verdict.brand_new) {
    verdict.trusted = start_from_quorum || verdict.fresh == nodes;
  } else {
    verdict.trusted = verdict.counted >= 1 && verdict.counted + verdict.fresh + quorum > nodes;
  }
  return verdict;
}

}  // namespace dlock::lock

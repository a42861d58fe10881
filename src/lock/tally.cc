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

}  // namespace

AcquireReply parse_acquire(const Result<resp::Reply>& outcome) {
  AcquireReply reply;
  const auto status = outcome ? int_at(*outcome, 0) : std::nullopt;
  const auto fence = outcome ? int_at(*outcome, 1) : std::nullopt;
  const auto detail = outcome ? int_at(*outcome, 2) : std::nullopt;
  if (!status || !fence || !detail || *fence < 0 || (*status != 0 && *status != 1)) {
    reply.error = failure(outcome, "acquire");
    return reply;
  }
  reply.kind = *status == 1 ? AcquireReply::Kind::granted : AcquireReply::Kind::held;
  reply.counter = static_cast<std::uint64_t>(*fence);
  reply.holder_ttl = *detail;
  return reply;
}

AcquireTally tally_acquire(const std::vector<AcquireReply>& replies, const std::vector<bool>& votes,
                           std::size_t quorum) {
  AcquireTally t;
  for (const auto& r : replies) {
    if (r.kind == AcquireReply::Kind::granted) t.token = std::max(t.token, r.counter);
    // A refusing node's counter may be the current holder's token: ours must be larger.
    if (r.kind == AcquireReply::Kind::held) t.token = std::max(t.token, r.counter + 1);
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
                                std::chrono::milliseconds(r.holder_ttl));
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
  if (now >= valid_until) return Extension::lost;
  if (extended >= quorum && validity(ttl, now - start, drift_factor).count() > 0) {
    return Extension::extended;
  }
  // Nodes that did not answer may still hold it: too few answers is not a loss yet.
  return extended + errors >= quorum ? Extension::no_quorum : Extension::lost;
}

HelloReply parse_hello(const Result<resp::Reply>& outcome) {
  HelloReply reply;
  if (!outcome || !outcome->is_array() || outcome->elements.size() != 5) return reply;
  const auto recorded = int_at(*outcome, 0);
  const auto state = int_at(*outcome, 1);
  const auto uptime = int_at(*outcome, 3);
  const auto floor = int_at(*outcome, 4);
  const auto& run_id = outcome->elements[2];
  if (!recorded || !state || !uptime || !floor || *floor < 0 || *state < 0 || *state > 2 ||
      run_id.type != resp::Reply::Type::string || run_id.str.empty()) {
    return reply;
  }
  reply.ok = true;
  reply.recorded_max_ttl = std::chrono::milliseconds(*recorded);
  reply.state = static_cast<int>(*state);
  reply.run_id = run_id.str;
  reply.uptime = std::chrono::seconds(*uptime);
  reply.fence_floor = static_cast<std::uint64_t>(*floor);
  return reply;
}

MembershipDecision decide_membership(const std::vector<HelloReply>& replies, std::size_t quorum,
                                     std::chrono::milliseconds client_ttl) {
  MembershipDecision d;
  d.nodes.resize(replies.size());
  std::size_t told = 0;
  std::size_t members = 0;
  std::size_t ever_members = 0;
  for (const auto& r : replies) {
    if (!r.ok) continue;
    ++told;
    members += r.state == 1 ? 1 : 0;
    ever_members += r.state != 0 ? 1 : 0;
    d.announced = std::max(d.announced, r.recorded_max_ttl);
    d.fence_floor = std::max(d.fence_floor, r.fence_floor);
  }
  const bool everyone = told == replies.size();
  if (everyone) d.announced = std::max(d.announced, client_ttl);
  const bool fresh = everyone && ever_members == 0;
  if (told < quorum || (members == 0 && !fresh)) return d;
  d.settled = true;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    const auto& r = replies[i];
    if (!r.ok) continue;
    auto& n = d.nodes[i];
    for (std::size_t j = 0; j < i; ++j) {
      if (replies[j].ok && replies[j].run_id == r.run_id) n.duplicate = true;
    }
    if (n.duplicate) continue;
    n.admitted = true;
    if (r.state == 1) continue;
    // Booted at most `uptime` ago (rounded down: the wait is at most a second too long).
    n.quarantine = fresh ? std::chrono::milliseconds(0)
                         : std::max(std::chrono::milliseconds(0), d.announced - r.uptime);
    n.join = n.quarantine.count() == 0;
  }
  return d;
}

}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
#include "service/keepalive.h"

#include <algorithm>
#include <memory>
#include <mutex>

namespace dlock::service {

std::optional<Failure> check_renewals(const std::vector<LeaseRenewal>& leases) {
  if (leases.size() > kMaxKeepAliveLeases) {
    return Failure{Code::invalid_argument, "at most " + std::to_string(kMaxKeepAliveLeases) +
                                               " leases per request, got " +
                                               std::to_string(leases.size())};
  }
  for (const LeaseRenewal& l : leases) {
    if (auto bad = check_owned(l.hold)) return bad;
    // A keep-alive names its ttl: the default of Extend would be a surprise here.
    if (l.ttl_ms <= 0) {
      return Failure{Code::invalid_argument, "lease '" + l.hold.name + "': ttl_ms must be " +
                                                 "positive, got " + std::to_string(l.ttl_ms)};
    }
  }
  return std::nullopt;
}

namespace {

// One round's answers, filled in by the extends as they complete.
struct Round {
  std::mutex mu;
  std::vector<Renewed> answers;  // guarded by mu
  std::size_t left = 0;          // guarded by mu
  std::function<void(std::vector<Renewed>)> done;
};

Renewed renewed(const LeaseRenewal& lease, const Outcome<std::int64_t>& outcome,
                std::optional<std::chrono::steady_clock::time_point> valid_until) {
  Renewed r{lease.hold.name, lease.hold.owner, 0, "", false};
  if (const auto* validity = std::get_if<std::int64_t>(&outcome)) {
    r.validity_ms = *validity;
    return r;
  }
  const Failure& f = std::get<Failure>(outcome);
  r.error = f.message;
  // Not that owner's any more, or never renewable: renewing it again cannot help.
  r.lost = f.code == Code::not_owner || f.code == Code::invalid_argument;
  if (!r.lost && valid_until) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        *valid_until - std::chrono::steady_clock::now());
    r.validity_ms = std::max<std::int64_t>(left.count(), 0);
  }
  // Without validity left the lease may be someone else's by now: it is lost.
  if (r.validity_ms == 0) r.lost = true;
  return r;
}

}  // namespace

void renew_all(Operations& ops, const std::vector<LeaseRenewal>& leases,
               std::vector<std::optional<std::chrono::steady_clock::time_point>> valid_until,
               std::function<void(std::vector<Renewed>)> done) {
  if (leases.empty()) return done({});
  valid_until.resize(leases.size());
  auto round = std::make_shared<Round>();
  round->answers.resize(leases.size());
  round->left = leases.size();
  round->done = std::move(done);
  for (std::size_t i = 0; i < leases.size(); ++i) {
    const LeaseRenewal& lease = leases[i];
    ops.extend(lease.hold, lease.ttl_ms,
               [round, i, lease, until = valid_until[i]](Outcome<std::int64_t> outcome) {
                 Renewed r = renewed(lease, outcome, until);
                 std::function<void(std::vector<Renewed>)> finish;
                 {
                   std::lock_guard lock(round->mu);
                   round->answers[i] = std::move(r);
                   if (--round->left == 0) finish = std::move(round->done);
                 }
                 // The last extend to complete answers for all, outside the mutex.
                 if (finish) finish(std::move(round->answers));
               });
  }
}

std::chrono::milliseconds renew_period(const std::vector<LeaseRenewal>& leases) {
  std::int64_t shortest = 0;
  for (const LeaseRenewal& l : leases) {
    shortest = shortest == 0 ? l.ttl_ms : std::min(shortest, l.ttl_ms);
  }
  return std::max(std::chrono::milliseconds(shortest / 3), std::chrono::milliseconds(10));
}

}  // namespace dlock::service

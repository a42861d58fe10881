// SPDX-License-Identifier: MIT
#include "lock/quorum_lock.h"

#include <algorithm>

#include "lock/keys.h"
#include "lock/validity.h"
#include "scripts/script.h"

namespace dlock::lock {
namespace {

// Locks per renew script call: bounds the time one call blocks a node.
constexpr std::size_t kRenewChunk = 256;

std::string ms(Clock::duration d) {
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(d).count()) + " ms";
}

std::string count_text(std::size_t got, std::size_t n, std::size_t quorum, const char* what) {
  return std::to_string(got) + " of " + std::to_string(n) + " nodes " + what + ", quorum is " +
         std::to_string(quorum);
}

// An integer element of a script's array reply, or nullopt if the reply has another shape.
std::optional<std::int64_t> int_at(const resp::Reply& r, std::size_t i) {
  if (!r.is_array() || r.elements.size() <= i || !r.elements[i].is_integer()) return std::nullopt;
  return r.elements[i].integer;
}

const char* kQuarantined = "restarted recently: kept out of quorums until its lost locks expire";

}  // namespace

std::chrono::milliseconds QuorumLock::drift(std::chrono::milliseconds ttl) const {
  return lock::drift(ttl, drift_factor_);
}

NodeError QuorumLock::node_error(std::size_t i, const Error& e) const {
  return NodeError{nodes_.address(i).display(), e.code(), e.summary()};
}

NodeError QuorumLock::node_error(std::size_t i, errc code, std::string reason) const {
  return NodeError{nodes_.address(i).display(), make_error_code(code), std::move(reason)};
}

std::variant<Acquired, Refused> QuorumLock::acquire(const std::string& name,
                                                    const OwnerToken& owner,
                                                    std::chrono::milliseconds ttl,
                                                    const std::optional<FairTicket>& fair) {
  const Membership::View view = membership_.refresh(ttl);
  const auto start = Clock::now();
  // The acquire waits for every node (up to the node timeout), unlike release: the fencing
  // token is the largest counter among the answers, and only reading every live node keeps it
  // growing while a minority of nodes restarts empty (docs/fencing.md). Returning at a quorum
  // broke FencingRedlockTest.ThousandAcquisitionsStayOrderedWhileMinorityNodesRestartEmpty.
  node::Outcomes outcomes =
      fair ? nodes_.run_script(
                 scripts::fair_acquire(),
                 {name, fence_key(name), queue_key(name), queue_alive_key(name)},
                 {owner.str(), std::to_string(ttl.count()), std::to_string(fair->arrival_ms),
                  std::to_string(fair->waiter_timeout.count()), fair->enqueue ? "1" : "0"})
           : nodes_.run_script(scripts::acquire(), {name, fence_key(name)},
                               {owner.str(), std::to_string(ttl.count())});

  std::size_t acquired = 0;
  std::size_t held = 0;
  std::uint64_t token = 0;  // larger than every counter seen
  std::vector<std::uint64_t> granted_counter(outcomes.size(), 0);
  std::optional<std::chrono::milliseconds> holder_ttl;
  bool reentered = false;
  std::vector<NodeError> failures;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    if (!o) {
      failures.push_back(node_error(i, o.error()));
      continue;
    }
    if (o->is_error()) {
      failures.push_back(node_error(i, errc::script_error, o->str));
      continue;
    }
    const auto status = int_at(*o, 0);
    const auto fence = int_at(*o, 1);
    const auto detail = int_at(*o, 2);
    if (!status || !fence || !detail || *fence < 0) {
      failures.push_back(node_error(i, errc::protocol_error, "unexpected reply to acquire"));
      continue;
    }
    const auto counter = static_cast<std::uint64_t>(*fence);
    if (*status == 1 || *status == 2) {
      token = std::max(token, counter);
      reentered = reentered || *status == 2;
      if (view.may_vote(nodes_, i)) {
        ++acquired;
        if (*status == 1) granted_counter[i] = counter;
      } else {
        failures.push_back(node_error(i, errc::quorum_not_reached, kQuarantined));
      }
    } else {
      ++held;
      token = std::max(token, counter + 1);
      if (*detail >= 0) {
        holder_ttl = std::max(holder_ttl.value_or(std::chrono::milliseconds(0)),
                              std::chrono::milliseconds(*detail));
      }
      std::string why = "held by another owner";
      if (*detail >= 0) why += " (expires in " + std::to_string(*detail) + " ms)";
      if (*detail == -2) why = "free, but another waiter is first in line";
      failures.push_back(node_error(i, errc::lock_held, std::move(why)));
    }
  }

  bool ok =
      acquired >= nodes_.quorum() && validity(ttl, Clock::now() - start, drift_factor_).count() > 0;
  bool fence_failed = false;
  if (ok && !reentered && nodes_.size() > 1) {
    const auto holding = std::count(granted_counter.begin(), granted_counter.end(), token);
    if (static_cast<std::size_t>(holding) < nodes_.quorum()) {
      fence_failed = !raise_fence(name, token, failures);
      ok = !fence_failed && validity(ttl, Clock::now() - start, drift_factor_).count() > 0;
    }
  }
  if (ok) return Acquired{FencingToken(token), start + (ttl - drift(ttl)), reentered};

  // Failed: give back whatever this attempt took, everywhere, also where the reply was lost.
  (void)release(name, owner);
  const auto elapsed = Clock::now() - start;
  const std::string counts = count_text(acquired, nodes_.size(), nodes_.quorum(), "acquired");
  if (fence_failed) {
    return Refused{Error(errc::quorum_not_reached,
                         "lock '" + name + "': fencing token not confirmed by a quorum (released)",
                         std::move(failures)),
                   std::nullopt};
  }
  if (acquired >= nodes_.quorum()) {
    return Refused{Error(errc::timeout, "lock '" + name + "': quorum reached after " + ms(elapsed) +
                                            ", too late for a ttl of " + ms(ttl) + " (released)"),
                   std::nullopt};
  }
  if (held > 0 && acquired + held >= nodes_.quorum()) {
    return Refused{
        Error(errc::lock_held, "lock '" + name + "' is held by another owner (" + counts + ")",
              std::move(failures)),
        holder_ttl};
  }
  return Refused{Error(errc::quorum_not_reached, "lock '" + name + "': no quorum (" + counts + ")",
                       std::move(failures)),
                 std::nullopt};
}

bool QuorumLock::raise_fence(const std::string& name, std::uint64_t token,
                             std::vector<NodeError>& failures) {
  const node::Enough raised{nodes_.quorum(), [token](std::size_t, const resp::Reply& r) {
                              return r.is_integer() &&
                                     r.integer >= static_cast<std::int64_t>(token);
                            }};
  node::Outcomes outcomes =
      nodes_.run_script(scripts::fence_raise(), {fence_key(name)}, {std::to_string(token)}, raised);
  std::size_t confirmed = 0;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    if (o && o->is_integer() && o->integer >= static_cast<std::int64_t>(token)) {
      ++confirmed;
    } else if (!o) {
      if (!o.error().is(errc::cancelled)) failures.push_back(node_error(i, o.error()));
    } else {
      failures.push_back(node_error(i, errc::script_error, "fence_raise: " + o->str));
    }
  }
  return confirmed >= nodes_.quorum();
}

void QuorumLock::leave_queue(const std::string& name, const OwnerToken& owner) {
  (void)nodes_.run_script(scripts::fair_leave(), {name, queue_key(name), queue_alive_key(name)},
                          {owner.str(), release_channel(name)});
}

Result<void> QuorumLock::release(const std::string& name, const OwnerToken& owner,
                                 std::size_t* listeners) {
  // Return once a quorum confirmed; the other nodes get the release all the same.
  const node::Enough confirmed_by{nodes_.quorum(), [](std::size_t, const resp::Reply& r) {
                                    const auto status = int_at(r, 0);
                                    return status && (*status == 1 || *status == 2);
                                  }};
  node::Outcomes outcomes =
      nodes_.run_script(scripts::release(), {name, queue_key(name), queue_alive_key(name)},
                        {owner.str(), release_channel(name)}, confirmed_by);
  std::size_t confirmed = 0;
  std::size_t errors = 0;
  std::vector<NodeError> failures;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    const auto status = o ? int_at(*o, 0) : std::nullopt;
    if (!status) {
      ++errors;
      failures.push_back(!o ? node_error(i, o.error())
                         : o->is_error()
                             ? node_error(i, errc::script_error, o->str)
                             : node_error(i, errc::protocol_error, "unexpected reply to release"));
    } else if (*status == 1 || *status == 2) {
      ++confirmed;
      const auto heard = int_at(*o, 1);
      if (listeners && *status == 1 && heard && *heard > 0) {
        *listeners = std::max(*listeners, static_cast<std::size_t>(*heard));
      }
    } else {
      failures.push_back(node_error(i, errc::not_owner, "not held by this owner"));
    }
  }
  if (confirmed >= nodes_.quorum()) return {};
  const std::string counts =
      count_text(confirmed, nodes_.size(), nodes_.quorum(), "confirmed the owner");
  if (confirmed + errors >= nodes_.quorum()) {
    return Error(errc::quorum_not_reached,
                 "lock '" + name + "': release not confirmed by a quorum (" + counts +
                     "); unreachable nodes drop it when the ttl ends",
                 std::move(failures));
  }
  return Error(errc::not_owner,
               "lock '" + name + "' is not held by owner '" + owner.str() + "' (" + counts + ")",
               std::move(failures));
}

Result<Clock::time_point> QuorumLock::judge_extension(const std::string& name, std::size_t extended,
                                                      std::size_t errors,
                                                      std::vector<NodeError> failures,
                                                      std::chrono::milliseconds ttl,
                                                      Clock::time_point start,
                                                      Clock::time_point valid_until) const {
  const auto now = Clock::now();
  if (now >= valid_until) {
    return Error(errc::lock_lost,
                 "lock '" + name + "': validity ended before the extension was confirmed",
                 std::move(failures));
  }
  if (extended >= nodes_.quorum() && validity(ttl, now - start, drift_factor_).count() > 0) {
    return start + (ttl - drift(ttl));
  }
  const std::string counts = count_text(extended, nodes_.size(), nodes_.quorum(), "extended");
  if (extended + errors >= nodes_.quorum()) {
    return Error(errc::quorum_not_reached,
                 "lock '" + name + "': extension not confirmed by a quorum (" + counts + ")",
                 std::move(failures));
  }
  return Error(errc::lock_lost,
               "lock '" + name + "' is no longer held by this owner (" + counts + ")",
               std::move(failures));
}

Result<Clock::time_point> QuorumLock::extend(const std::string& name, const OwnerToken& owner,
                                             std::chrono::milliseconds ttl,
                                             Clock::time_point valid_until) {
  // One lock is a batch of one: the same script and the same judgement as the watchdog's.
  return std::move(renew({Renewal{name, owner, ttl, valid_until}}).front());
}

std::vector<Result<Clock::time_point>> QuorumLock::renew(const std::vector<Renewal>& renewals) {
  if (renewals.empty()) return {};
  std::chrono::milliseconds max_ttl{0};
  for (const auto& r : renewals) max_ttl = std::max(max_ttl, r.ttl);
  const Membership::View view = membership_.refresh(max_ttl);

  std::vector<node::Call> calls;
  for (std::size_t first = 0; first < renewals.size(); first += kRenewChunk) {
    node::Call call{&scripts::renew(), {}, {}};
    for (std::size_t k = first; k < std::min(renewals.size(), first + kRenewChunk); ++k) {
      call.keys.push_back(renewals[k].name);
      call.args.push_back(renewals[k].owner.str());
      call.args.push_back(std::to_string(renewals[k].ttl.count()));
    }
    calls.push_back(std::move(call));
  }
  const auto start = Clock::now();
  std::vector<node::Outcomes> outcomes = nodes_.run(calls);

  std::vector<Result<Clock::time_point>> results;
  results.reserve(renewals.size());
  for (std::size_t k = 0; k < renewals.size(); ++k) {
    const auto& per_node = outcomes[k / kRenewChunk];
    const std::size_t slot = k % kRenewChunk;
    std::size_t extended = 0;
    std::size_t errors = 0;
    std::vector<NodeError> failures;
    for (std::size_t i = 0; i < per_node.size(); ++i) {
      const auto& o = per_node[i];
      if (!o) {
        ++errors;
        failures.push_back(node_error(i, o.error()));
        continue;
      }
      const auto answer = int_at(*o, slot);
      if (!answer) {
        ++errors;
        failures.push_back(node_error(i, errc::script_error, o->is_error() ? o->str : "renew"));
      } else if (*answer != 1) {
        failures.push_back(node_error(i, errc::not_owner, "not held by this owner"));
      } else if (!view.may_vote(nodes_, i)) {
        ++errors;
        failures.push_back(node_error(i, errc::quorum_not_reached, kQuarantined));
      } else {
        ++extended;
      }
    }
    results.push_back(judge_extension(renewals[k].name, extended, errors, std::move(failures),
                                      renewals[k].ttl, start, renewals[k].valid_until));
  }
  return results;
}

LockStatus QuorumLock::inspect(const std::string& name) {
  const std::vector<std::chrono::milliseconds> quarantine = membership_.quarantine();
  node::Outcomes outcomes =
      nodes_.run_script(scripts::inspect(), {name, fence_key(name), queue_key(name)}, {});
  LockStatus status;
  status.name = name;
  status.quorum = nodes_.quorum();
  std::size_t present = 0;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    NodeLockState n;
    n.node = nodes_.address(i).display();
    n.quarantined_ms = quarantine[i].count();
    const auto& o = outcomes[i];
    if (!o) {
      n.error = o.error().summary();
    } else if (o->is_error()) {
      n.error = o->str;
    } else if (!o->is_array() || o->elements.size() < 4 || !o->elements[1].is_integer() ||
               !o->elements[2].is_integer() || !o->elements[3].is_integer() ||
               o->elements.size() % 2 != 0) {
      n.error = "unexpected reply to inspect";
    } else {
      n.kind = o->elements[0].str;
      n.ttl_ms = o->elements[1].integer;
      n.fence = o->elements[2].integer;
      n.queued = o->elements[3].integer;
      for (std::size_t k = 4; k + 1 < o->elements.size(); k += 2) {
        std::int64_t count = 0;
        try {
          count = std::stoll(o->elements[k + 1].str);
        } catch (const std::exception&) {
          count = 0;
        }
        n.owners.emplace_back(o->elements[k].str, count);
      }
      if (n.kind != "free") ++present;
    }
    status.nodes.push_back(std::move(n));
  }
  status.held = present >= nodes_.quorum();
  return status;
}

std::vector<ForcedRelease> QuorumLock::force_release(const std::string& name,
                                                     bool include_foreign) {
  node::Outcomes outcomes = nodes_.run_script(scripts::force_release(), {name, queue_key(name)},
                                              {release_channel(name), include_foreign ? "1" : "0"});
  std::vector<ForcedRelease> report;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    ForcedRelease r{nodes_.address(i).display(), {}, std::nullopt};
    const auto& o = outcomes[i];
    if (!o) {
      r.error = o.error().summary();
    } else if (o->is_error()) {
      r.error = o->str;
    } else {
      r.outcome = o->str;
    }
    report.push_back(std::move(r));
  }
  return report;
}

}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
#include "lock/quorum_lock.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "engine/run.h"
#include "lock/keys.h"
#include "lock/validity.h"
#include "node/server_identity.h"
#include "scripts/script.h"

namespace dlock::lock {
namespace {

std::string ms(Clock::duration d) {
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(d).count()) + " ms";
}

std::string count_text(std::size_t got, std::size_t n, std::size_t quorum, const char* what) {
  return std::to_string(got) + " of " + std::to_string(n) + " nodes " + what + ", quorum is " +
         std::to_string(quorum);
}

const char* kQuarantined = "restarted recently: kept out of quorums until its lost locks expire";
const char* kDuplicate = "the same server as another node of this client: it votes once";
const char* kUnannounced =
    "the ttl could not be announced to a quorum of nodes (restart protection needs it)";
const char* kNotGreeted =
    "missed the last greeting (no answer, or not a member yet): not counted until a greeting "
    "reaches it";
const char* kNewEpoch =
    "reached another server process during the round (a reconnect, a failover, or a cluster "
    "slot that moved): not counted until it is greeted again";

std::string why_not_voting(const Membership::View& view, const node::Fanout& nodes, std::size_t i) {
  if (!view.excluded(i).empty()) return "never votes: " + view.excluded(i);
  if (!view.unsettled().empty() && nodes.epoch(i) != view.epoch(i)) {
    return "not greeted: " + view.unsettled();
  }
  if (view.ttl_unannounced) return kUnannounced;
  if (view.duplicate(i)) return kDuplicate;
  if (view.epoch(i) == Membership::kUnchecked) return kNotGreeted;
  return view.votes(i) && nodes.epoch(i) != view.epoch(i) ? kNewEpoch : kQuarantined;
}

std::string why_held(std::int64_t holder_ttl) {
  if (holder_ttl == -2) return "free, but another waiter is first in line";
  std::string why = "held by another owner";
  if (holder_ttl >= 0) why += " (expires in " + std::to_string(holder_ttl) + " ms)";
  return why;
}

// inspect.lua's and force_release.lua's words (src/scripts/); anything else is a reply this
// version does not understand.
std::optional<KeyKind> key_kind(std::string_view word) {
  for (const KeyKind k : {KeyKind::free, KeyKind::dlock, KeyKind::shared, KeyKind::foreign}) {
    if (word == to_string(k)) return k;
  }
  return std::nullopt;
}

// inspect.lua's reply into `n`; false if it has not the documented shape.
bool parse_inspect(const resp::Reply& o, NodeLockState& n) {
  const auto& e = o.elements;
  const auto kind = o.is_array() && !e.empty() ? key_kind(e[0].str) : std::nullopt;
  if (!kind || e.size() < 6) return false;
  for (std::size_t k = 1; k < 6; ++k) {
    if (!e[k].is_integer() || (k > 1 && e[k].integer < 0)) return false;
  }
  const auto holders = static_cast<std::size_t>(e[5].integer);
  if (holders > (e.size() - 6) / 2 || (e.size() - 6 - 2 * holders) % 3 != 0) return false;
  n.kind = *kind;
  if (e[1].integer >= 0) n.ttl = std::chrono::milliseconds(e[1].integer);
  n.fence = FencingToken(static_cast<std::uint64_t>(e[2].integer));
  n.queued = static_cast<std::size_t>(e[3].integer);
  n.writers_waiting = static_cast<std::size_t>(e[4].integer);
  std::size_t k = 6;
  for (; k < 6 + 2 * holders; k += 2)
    n.owners.push_back(NodeHolder{OwnerToken(e[k].str), e[k + 1].str});
  for (; k + 2 < e.size(); k += 3) {
    if (!e[k + 2].is_integer()) return false;
    n.readers.push_back(NodeReader{OwnerToken(e[k].str), e[k + 1].str,
                                   std::chrono::milliseconds(e[k + 2].integer)});
  }
  return true;
}

std::optional<ForceOutcome> force_outcome(std::string_view word) {
  for (const ForceOutcome o : {ForceOutcome::deleted, ForceOutcome::deleted_foreign,
                               ForceOutcome::kept_foreign, ForceOutcome::free}) {
    if (word == to_string(o)) return o;
  }
  return std::nullopt;
}

// `outcomes` ends with max_ttl_raise's, which it takes off. A node whose record was not raised
// (out of memory, say, or its replicas did not confirm it: "REPLICAS ...") does not count as
// renewed: the lease would outlive what a greeting reads there after a restart.
void count_only_raised(std::vector<node::Outcomes>& outcomes, std::chrono::milliseconds max_ttl) {
  const node::Outcomes raised = std::move(outcomes.back());
  outcomes.pop_back();
  for (std::size_t i = 0; i < raised.size(); ++i) {
    const auto& r = raised[i];
    if (r && r->is_integer() && r->integer >= max_ttl.count()) continue;
    const Error why =
        !r ? r.error()
           : Error(errc::script_error,
                   "max_ttl_raise: " + (r->is_error() ? script_error_text(r->str) : "bad reply"));
    for (auto& call : outcomes) call[i] = why;
  }
}

// Why a granting node's answer to fence_raise.lua did not confirm the token; `new_epoch`: its
// connection changed since it voted.
std::string why_not_raised(const resp::Reply& r, bool new_epoch) {
  if (new_epoch) return kNewEpoch;
  if (r.is_integer() && r.integer == -1) {
    return "fence_raise: the hold is no longer on this node (released by force, expired early, "
           "or another server behind the address)";
  }
  if (r.is_integer()) return "fence_raise: the counter is " + std::to_string(r.integer);
  return "fence_raise: unexpected reply";
}

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

node::ScriptRound QuorumLock::send_acquire(const HoldId& hold, std::chrono::milliseconds ttl,
                                           const std::optional<FairTicket>& fair, WriterWait writer,
                                           ReplicaGuard guard, std::size_t permits,
                                           node::SharedText announcement) {
  // The node's counter (one INCR per grant), on any number of nodes: on several, the nodes'
  // counters disagree when grants of other names reach them in different orders (several
  // clients), and the token then takes the raise round (raise_fence) that a name's counter,
  // moving together across the nodes for a name taken again and again, seldom needs. Measured,
  // the INCR costs Redis less than the name's counter's four commands by more than the raises
  // cost (docs/protocol-lean.md, "The node's counter on several nodes").
  node::Call call =
      acquire_call(hold, ttl, fair, writer, permits, std::move(announcement), TokenCounter::node);
  call.min_replicas = guard.replicas;
  call.replica_timeout = guard.timeout;
  call.record_drift = drift_factor_;
  if (!record_window_) call.record_known_arg = std::string_view::npos;
  return node::ScriptRound(nodes_, std::move(call));
}

namespace {

// A grant leaves the queues when it was in line, or registered as a waiting writer, on a node
// that did not grant. A registration may be an earlier attempt's of this wait
// (writer.registered), on a node that refused this attempt for another reason and so did not
// register it again (a grant drops it only where it grants): left there, it kept that node's
// readers out until its deadline (two such nodes of three kept every reader out that long).
bool leaves_queues(const AcquireTally& tally, std::size_t nodes, bool fair,
                   const WriterWait& writer) {
  const bool missed_some = tally.granted < nodes;
  return (missed_some && (fair || writer.registered)) || tally.writer_registered;
}

}  // namespace

std::variant<Acquired, Refused> QuorumLock::acquire(const HoldId& hold,
                                                    std::chrono::milliseconds ttl,
                                                    const std::optional<FairTicket>& fair,
                                                    WriterWait writer, ReplicaGuard guard,
                                                    std::size_t permits) {
  return engine::run_sync(acquire_task(hold, ttl, fair, writer, guard, permits));
}

engine::Task<std::variant<Acquired, Refused>> QuorumLock::acquire_task(
    const HoldId& hold, std::chrono::milliseconds ttl, std::optional<FairTicket> fair,
    WriterWait writer, ReplicaGuard guard, std::size_t permits) {
  auto refreshing = membership_.refreshing(ttl, /*attempt=*/true);
  const Membership::View view = co_await std::move(refreshing);
  const auto start = Clock::now();
  // The acquire waits for every node (up to the node timeout), unlike release: the fencing
  // token is the largest counter among the answers, and only reading every live node keeps it
  // growing while a minority of nodes restarts empty (docs/fencing.md).
  // The announcement shared with the view's record, not copied into the call.
  node::ScriptRound round = send_acquire(
      hold, ttl, fair, writer, guard, permits,
      node::SharedText(std::shared_ptr<const std::string>(view.basis, &view.basis->announcement)));
  const node::Outcomes outcomes = co_await round;

  AcquireAnswers answers = read_acquire(outcomes, view, permits);
  std::vector<NodeError>& failures = answers.failures;
  const AcquireTally tally = tally_acquire(answers.replies, answers.votes, nodes_.quorum());

  // A node that recorded another permit count refuses, whatever the others said: two counts
  // in use would let more holders in than the semaphore has permits.
  bool ok = !tally.recorded_permits && tally.granted >= nodes_.quorum() &&
            validity(ttl, Clock::now() - start, drift_factor_).count() > 0;
  bool fence_failed = false;
  if (ok && !tally.token_on_quorum) {
    auto raising =
        raise_fence(hold, tally.token, ttl, granting_voters(answers.replies, answers.votes),
                    view.basis->epochs, failures);
    fence_failed = !co_await std::move(raising);
    ok = !fence_failed && validity(ttl, Clock::now() - start, drift_factor_).count() > 0;
  } else if (ok && tally.granted_below) {
    raise_behind(hold, tally.token, ttl);
  }
  if (ok) {
    auto handing = hand_over(hold, ttl, start, tally,
                             leaves_queues(tally, nodes_.size(), fair.has_value(), writer));
    auto handed = co_await std::move(handing);
    if (handed) co_return std::move(*handed);
    co_return refusal(hold.name, tally, Clock::now() - start, ttl, std::move(failures), false,
                      permits);
  }

  // Failed: give back whatever this attempt took, everywhere, also where the reply was lost.
  // The release names this attempt's hold id, so where the attempt did nothing (never sent,
  // refused, a stale hold of ours not taken over) it changes nothing.
  auto releasing = release_task(hold);
  (void)co_await std::move(releasing);
  // The announcement this attempt was made under is taken back once nothing else of this
  // client is in flight: a refused attempt records nothing that outlives it (issue 28).
  auto settling = settle(/*refused=*/true, std::chrono::milliseconds(0));
  co_await std::move(settling);
  Refused refused = refusal(hold.name, tally, Clock::now() - start, ttl, std::move(failures),
                            fence_failed, permits);
  if (!tally.recorded_permits) refused.writer_registered = tally.writer_registered;
  co_return refused;
}

engine::Task<std::optional<Acquired>> QuorumLock::hand_over(HoldId hold,
                                                            std::chrono::milliseconds ttl,
                                                            Clock::time_point start,
                                                            AcquireTally tally, bool leave_queues) {
  // In line (or registered as a waiting writer) on nodes that did not grant: leave there, or
  // the next waiter waits behind us.
  if (leave_queues) {
    auto leaving = leave_queue_task(hold.name, hold.owner);
    co_await std::move(leaving);
  }
  auto settling = settle(/*refused=*/false, ttl);
  co_await std::move(settling);
  // Leaving queues and settling may have waited (a round; the membership's lock behind a
  // greeting that waits for a silent node): a lease whose validity ran out meanwhile is not
  // handed over. It is released, and refused as one granted too late (a chaos run with many
  // acquisitions in flight saw leases arrive with no validity left, and used).
  if (validity(ttl, Clock::now() - start, drift_factor_).count() > 0) {
    co_return Acquired{FencingToken(tally.token), start + (ttl - drift(ttl))};
  }
  auto releasing = release_task(hold);
  (void)co_await std::move(releasing);
  co_return std::nullopt;
}

QuorumLock::AcquireAnswers QuorumLock::read_acquire(const node::Outcomes& outcomes,
                                                    const Membership::View& view,
                                                    std::size_t permits) const {
  AcquireAnswers answers;
  answers.votes.resize(outcomes.size());
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    answers.replies.push_back(parse_acquire(outcomes[i]));
    answers.votes[i] = view.may_vote(nodes_, i);
    const auto& r = answers.replies.back();
    auto& failures = answers.failures;
    if (r.kind == AcquireReply::Kind::failed) {
      failures.push_back(node_error(i, r.error));
    } else if (r.kind == AcquireReply::Kind::held) {
      failures.push_back(node_error(i, errc::lock_held, why_held(r.holder_ttl)));
    } else if (r.kind == AcquireReply::Kind::mismatch) {
      failures.push_back(node_error(i, errc::invalid_argument,
                                    "the semaphore has " + std::to_string(r.permits) +
                                        " permits here, not " + std::to_string(permits)));
    } else if (!answers.votes[i]) {
      failures.push_back(node_error(i, errc::quorum_not_reached, why_not_voting(view, nodes_, i)));
    }
  }
  return answers;
}

Refused QuorumLock::refusal(const std::string& name, const AcquireTally& tally,
                            Clock::duration elapsed, std::chrono::milliseconds ttl,
                            std::vector<NodeError> failures, bool fence_failed,
                            std::size_t permits) const {
  if (tally.recorded_permits) {
    return Refused{
        Error(errc::invalid_argument,
              "lock '" + name + "': the semaphore has " + std::to_string(*tally.recorded_permits) +
                  " permits, not " + std::to_string(permits) +
                  ": every client must name the same count (change it with "
                  "Client::resize_semaphore or `dlock semaphore resize`)",
              std::move(failures)),
        std::nullopt};
  }
  const std::string counts = count_text(tally.granted, nodes_.size(), nodes_.quorum(), "acquired");
  if (fence_failed) {
    return Refused{Error(errc::quorum_not_reached,
                         "lock '" + name + "': fencing token not confirmed by a quorum (released)",
                         std::move(failures)),
                   std::nullopt};
  }
  if (tally.granted >= nodes_.quorum()) {
    return Refused{Error(errc::timeout, "lock '" + name + "': quorum reached after " + ms(elapsed) +
                                            ", too late for a ttl of " + ms(ttl) + " (released)"),
                   std::nullopt};
  }
  if (tally.held > 0 && tally.granted + tally.held >= nodes_.quorum()) {
    Error held(errc::lock_held, "lock '" + name + "' is held by another owner (" + counts + ")",
               std::move(failures));
    if (!tally.holder_without_ttl) held.set_holder_ttl(tally.holder_ttl);
    return Refused{std::move(held), tally.holder_ttl};
  }
  return Refused{Error(errc::quorum_not_reached, "lock '" + name + "': no quorum (" + counts + ")",
                       std::move(failures)),
                 std::nullopt};
}

engine::Task<bool> QuorumLock::raise_fence(HoldId hold, std::uint64_t token,
                                           std::chrono::milliseconds ttl, std::vector<bool> granted,
                                           std::vector<std::uint64_t> epochs,
                                           std::vector<NodeError>& failures) {
  // Only where this hold was granted, and only where the raise found it still there (the reply
  // is -1 if not): from the grant to the raise no conflicting hold (a writer, or a reader beside
  // a writer) can be granted there, and counters never go down, so every later conflicting
  // holder's quorum meets a node whose counter was at least `token` first. A node that did not
  // grant may have reached `token` by another client's grant made meanwhile, which a later grant
  // of that client then repeats on a node that lagged
  // (SimDirected.AFenceRaiseCountsOnlyTheNodesThatGrantedTheHold); so may a granting node whose
  // hold was removed before the raise (an operator's force_release, a clock step that expired
  // it early: SimDirected.AFenceRaiseCountsOnlyWhereTheHoldIsStillThere). And only on the
  // connection the grant came on: membership counts nothing from a connection it has not
  // judged (may_vote, may_extend). Every node is raised all the same, so that none stays behind.
  node::Fanout& nodes = nodes_;
  const auto counts = [&nodes, token, granted, epochs](std::size_t i, const resp::Reply& r) {
    return granted[i] && nodes.epoch(i) == epochs[i] && r.is_integer() &&
           r.integer >= static_cast<std::int64_t>(token);
  };
  node::ScriptRound round(nodes_, fence_raise_call(hold, token, ttl),
                          node::Enough{nodes_.quorum(), counts});
  node::Outcomes outcomes = co_await round;
  std::size_t confirmed = 0;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    if (o && counts(i, *o)) {
      ++confirmed;
    } else if (!o) {
      if (!o.error().is(errc::cancelled)) failures.push_back(node_error(i, o.error()));
    } else if (o->is_error()) {
      failures.push_back(
          node_error(i, errc::script_error, "fence_raise: " + script_error_text(o->str)));
    } else if (granted[i]) {
      failures.push_back(node_error(i, errc::quorum_not_reached,
                                    why_not_raised(*o, nodes_.epoch(i) != epochs[i])));
    }
  }
  co_return confirmed >= nodes_.quorum();
}

void QuorumLock::raise_behind(const HoldId& hold, std::uint64_t token,
                              std::chrono::milliseconds ttl) {
  std::vector<node::Call> calls;
  calls.push_back(fence_raise_call(hold, token, ttl));
  // Started on the io thread and not awaited: the lease does not wait for it. NodeSet runs
  // posted work only while it lives, and the round's callbacks keep nothing of this object.
  node::Fanout& nodes = nodes_;
  nodes_.post([&nodes, calls = std::move(calls)]() mutable {
    nodes.start(std::move(calls), {}, [](std::vector<node::Outcomes>) {});
  });
}

engine::Quick<bool, QuorumLock::SettleLater> QuorumLock::settle(bool refused,
                                                                std::chrono::milliseconds granted) {
  std::optional<std::vector<std::string>> taken = membership_.try_settle(refused, granted);
  std::optional<bool> fast;
  if (taken && taken->empty()) fast = false;
  return {fast, SettleLater{this, refused, granted, std::move(taken)}};
}

engine::Task<bool> QuorumLock::settle_task(bool refused, std::chrono::milliseconds granted,
                                           std::optional<std::vector<std::string>> taken) {
  if (!taken) {
    auto settling = membership_.settle_task(refused, granted);
    taken = co_await std::move(settling);
  }
  if (taken->empty()) co_return false;
  auto retracting = retract(std::move(*taken));
  co_return co_await std::move(retracting);
}

engine::Task<bool> QuorumLock::end_wait_task() {
  auto ending = membership_.end_wait_task();
  std::vector<std::string> retracted = co_await std::move(ending);
  auto retracting = retract(std::move(retracted));
  co_return co_await std::move(retracting);
}

engine::Task<bool> QuorumLock::retract(std::vector<std::string> retracted) {
  if (retracted.empty()) co_return false;
  // Best effort: a node that misses it keeps the announcement until it lapses (two ttls), a
  // longer quarantine there, never a shorter one.
  node::ScriptRound round(nodes_, max_ttl_retract_call(std::move(retracted)));
  (void)co_await round;
  co_return true;
}

void QuorumLock::leave_queue(const std::string& name, const OwnerToken& owner) {
  engine::run_sync(leave_queue_task(name, owner));
}

engine::Task<bool> QuorumLock::leave_queue_task(std::string name, OwnerToken owner) {
  node::ScriptRound round(nodes_, fair_leave_call(name, owner));
  (void)co_await round;
  co_return true;
}

Result<void> QuorumLock::release(const HoldId& hold, std::size_t* listeners) {
  return engine::run_sync(release_task(hold, listeners));
}

engine::Task<Result<void>> QuorumLock::release_task(const HoldId& hold, std::size_t* listeners) {
  // Return once a quorum confirmed; the other nodes get the release all the same.
  node::Enough confirmed_by{nodes_.quorum(),
                            [](std::size_t, const resp::Reply& r) { return release_freed(r); }};
  const std::string& name = hold.name;
  node::ScriptRound round(nodes_, release_call(hold), std::move(confirmed_by));
  node::Outcomes outcomes = co_await round;
  std::size_t confirmed = 0;
  std::size_t errors = 0;
  std::vector<NodeError> failures;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const ReleaseReply r = parse_release(outcomes[i]);
    if (r.kind == ReleaseReply::Kind::failed) {
      ++errors;
      failures.push_back(node_error(i, r.error));
    } else if (r.kind == ReleaseReply::Kind::freed) {
      ++confirmed;
      if (listeners && r.listeners > 0) {
        *listeners = std::max(*listeners, static_cast<std::size_t>(r.listeners));
      }
    } else {
      failures.push_back(node_error(i, errc::not_owner, "not held by this owner"));
    }
  }
  if (confirmed >= nodes_.quorum()) co_return Result<void>{};
  const std::string counts =
      count_text(confirmed, nodes_.size(), nodes_.quorum(), "confirmed the owner");
  if (confirmed + errors >= nodes_.quorum()) {
    co_return Error(errc::quorum_not_reached,
                    "lock '" + name + "': release not confirmed by a quorum (" + counts +
                        "); unreachable nodes drop it when the ttl ends",
                    std::move(failures));
  }
  co_return Error(
      errc::not_owner,
      "lock '" + name + "' is not held by owner '" + hold.owner.str() + "' (" + counts + ")",
      std::move(failures));
}

Result<Clock::time_point> QuorumLock::extend(const HoldId& hold, std::chrono::milliseconds ttl,
                                             Clock::time_point valid_until) {
  return engine::run_sync(extend_task(hold, ttl, valid_until));
}

engine::Task<Result<Clock::time_point>> QuorumLock::extend_task(HoldId hold,
                                                                std::chrono::milliseconds ttl,
                                                                Clock::time_point valid_until) {
  // One hold is a batch of one: the same script and the same judgement as the watchdog's.
  std::vector<Renewal> one;
  one.push_back(Renewal{std::move(hold), ttl, valid_until});
  auto renewing = renew_task(std::move(one));
  auto results = co_await std::move(renewing);
  co_return std::move(results.front());
}

std::vector<Result<Clock::time_point>> QuorumLock::renew(const std::vector<Renewal>& renewals) {
  return engine::run_sync(renew_task(renewals));
}

engine::Task<std::vector<Result<Clock::time_point>>> QuorumLock::renew_task(
    std::vector<Renewal> renewals) {
  if (renewals.empty()) co_return std::vector<Result<Clock::time_point>>{};
  // A hold whose validity has ended is not renewed: its lease is lost whatever the nodes say,
  // and re-arming its key would only keep it past its lease for nothing.
  std::vector<std::size_t> live;
  std::chrono::milliseconds max_ttl{0};
  for (std::size_t k = 0; k < renewals.size(); ++k) {
    if (Clock::now() >= renewals[k].valid_until) continue;
    live.push_back(k);
    max_ttl = std::max(max_ttl, renewals[k].ttl);
  }
  std::vector<Result<Clock::time_point>> results;
  results.reserve(renewals.size());
  for (const auto& r : renewals) {
    results.emplace_back(
        Error(errc::timeout, "lock '" + r.hold.name + "': validity ended before the extension"));
  }
  if (live.empty()) co_return results;
  auto refreshing = membership_.refreshing(max_ttl, /*attempt=*/true);
  const Membership::View view = co_await std::move(refreshing);
  // Again after the greeting: it can take a round trip, or wait behind another's, longer than
  // a validity had left (SimDirected.AValidityThatEndsDuringTheGreetingIsNotRenewed).
  std::erase_if(live, [&](std::size_t k) { return Clock::now() >= renewals[k].valid_until; });
  if (live.empty()) {
    auto settling = settle(/*refused=*/false, std::chrono::milliseconds(0));
    co_await std::move(settling);
    co_return results;
  }

  std::vector<RenewPlace> places(live.size());
  std::vector<node::Call> calls = renew_calls(renewals, live, places);
  // The renewed leases live on past the grants that recorded their ttl: recorded again, on
  // every node (also where a grant missed), for what a greeting reads after a restart; where
  // one master holds the keys and that record, confirmed on its replicas first when no record
  // confirmed before covers the largest ttl (max_ttl_raise_call): else that node's renewals do
  // not count (count_only_raised).
  calls.push_back(max_ttl_raise_call(max_ttl));
  calls.back().record_drift = drift_factor_;
  const auto start = Clock::now();
  node::Round round(nodes_, std::move(calls));
  std::vector<node::Outcomes> outcomes = co_await round;
  const auto now = Clock::now();
  auto settling = settle(/*refused=*/false, max_ttl);
  co_await std::move(settling);
  count_only_raised(outcomes, max_ttl);
  for (std::size_t j = 0; j < live.size(); ++j) {
    results[live[j]] = judge_renewal(renewals[live[j]], outcomes[places[j].call], places[j].entry,
                                     view, start, now);
  }
  co_return results;
}

Result<Clock::time_point> QuorumLock::judge_renewal(const Renewal& renewal,
                                                    const node::Outcomes& per_node,
                                                    std::size_t slot, const Membership::View& view,
                                                    Clock::time_point start,
                                                    Clock::time_point now) const {
  std::size_t extended = 0;
  std::size_t errors = 0;
  std::vector<NodeError> failures;
  for (std::size_t i = 0; i < per_node.size(); ++i) {
    const auto& o = per_node[i];
    switch (parse_renew(o, slot)) {
      case RenewReply::failed:
        ++errors;
        failures.push_back(!o ? node_error(i, o.error())
                              : node_error(i, errc::script_error,
                                           o->is_error() ? script_error_text(o->str) : "renew"));
        break;
      case RenewReply::not_held:
        failures.push_back(node_error(i, errc::not_owner, "not held by this owner"));
        break;
      case RenewReply::renewed:
        if (view.may_extend(nodes_, i)) {
          ++extended;
        } else {
          ++errors;
          failures.push_back(
              node_error(i, errc::quorum_not_reached, why_not_voting(view, nodes_, i)));
        }
        break;
    }
  }
  const std::string& name = renewal.hold.name;
  const std::string counts = count_text(extended, nodes_.size(), nodes_.quorum(), "extended");
  switch (judge_extension(extended, errors, nodes_.quorum(), renewal.ttl, drift_factor_, start, now,
                          renewal.valid_until)) {
    case Extension::extended:
      return start + (renewal.ttl - drift(renewal.ttl));
    case Extension::no_quorum:
      return Error(errc::quorum_not_reached,
                   "lock '" + name + "': extension not confirmed by a quorum (" + counts + ")",
                   std::move(failures));
    case Extension::expired:
      return Error(errc::timeout,
                   "lock '" + name + "': validity ended before the extension was confirmed",
                   std::move(failures));
    case Extension::lost:
      break;
  }
  return Error(errc::lock_lost,
               "lock '" + name + "' is no longer held by this owner (" + counts + ")",
               std::move(failures));
}

Result<std::size_t> QuorumLock::resize_permits(const std::string& name, std::size_t permits,
                                               std::size_t max_permits) {
  const auto resize_to = [&](std::size_t n, std::size_t check_from) {
    return nodes_.run({semaphore_resize_call(name, n, check_from, max_permits)}).front();
  };
  const node::Outcomes outcomes = resize_to(permits, permits);
  std::size_t had = 0;
  std::size_t answered = 0;
  std::optional<std::int64_t> held_slot;
  std::vector<std::size_t> changed_from(outcomes.size(), 0);  // 0: not changed
  std::vector<NodeError> failures;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    const bool shaped = o && o->is_array() && o->elements.size() == 2 &&
                        o->elements[0].is_integer() && o->elements[1].is_integer();
    if (!shaped) {
      failures.push_back(
          !o ? node_error(i, o.error())
             : node_error(i, errc::script_error, o->is_error() ? o->str : "semaphore_resize"));
      continue;
    }
    ++answered;
    const std::int64_t status = o->elements[0].integer;
    const std::int64_t detail = o->elements[1].integer;
    if (status == 1 && detail > 0) {
      had = std::max(had, static_cast<std::size_t>(detail));
      if (static_cast<std::size_t>(detail) != permits) {
        changed_from[i] = static_cast<std::size_t>(detail);
      }
    } else if (status == -2) {
      held_slot = detail;
      failures.push_back(
          node_error(i, errc::lock_held, "permit " + std::to_string(detail) + " is held here"));
    }
  }
  if (held_slot) {
    // Set back where it changed: a count that differs between nodes refuses every client.
    const std::size_t back = *std::max_element(changed_from.begin(), changed_from.end());
    if (back > 0) (void)resize_to(back, max_permits);
    return Error(errc::lock_held,
                 "semaphore '" + name + "': permit " + std::to_string(*held_slot) +
                     " is held, so it cannot shrink to " + std::to_string(permits) +
                     " (its holder would be one too many); nothing changed, try again once "
                     "it is released",
                 std::move(failures));
  }
  if (answered < outcomes.size()) {
    return Error(errc::quorum_not_reached,
                 "semaphore '" + name + "': " + std::to_string(answered) + " of " +
                     std::to_string(outcomes.size()) +
                     " nodes resized; the others keep the old count and refuse clients of the "
                     "new one: run it again",
                 std::move(failures));
  }
  return had;
}

LockStatus QuorumLock::inspect(const std::string& name) {
  return engine::run_sync(inspect_task(name));
}

engine::Task<LockStatus> QuorumLock::inspect_task(std::string name) {
  auto refreshing = membership_.quarantine_task();
  const std::vector<std::chrono::milliseconds> quarantine = co_await std::move(refreshing);
  std::vector<std::string> info;  // not a braced list: GCC 12 miscompiles those in a coroutine
  info.emplace_back("INFO");
  node::ScriptRound info_round(nodes_, std::move(info));
  const node::Outcomes infos = co_await info_round;
  node::ScriptRound inspect_round(nodes_, inspect_call(name));
  node::Outcomes outcomes = co_await inspect_round;
  LockStatus status;
  status.name = name;
  status.quorum = nodes_.quorum();
  std::size_t present = 0;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    NodeLockState n;
    n.node = nodes_.address(i).display();
    n.quarantine = quarantine[i];
    n.never_votes = membership_.never_votes(infos[i]);
    if (infos[i] && infos[i]->type == resp::Reply::Type::string) {
      if (const auto evicted = node::info_field(infos[i]->str, "evicted_keys"); !evicted.empty()) {
        n.evicted_keys = std::strtoull(evicted.c_str(), nullptr, 10);
      }
    }
    const auto& o = outcomes[i];
    if (!o) {
      n.error = node_error(i, o.error());
    } else if (o->is_error()) {
      n.error = node_error(i, errc::server_error, o->str);
    } else if (!parse_inspect(*o, n)) {
      n.error = node_error(i, errc::protocol_error, "unexpected reply to inspect");
    } else {
      if (n.kind != KeyKind::free) ++present;
    }
    status.nodes.push_back(std::move(n));
  }
  status.held = present >= nodes_.quorum();
  co_return status;
}

std::vector<ForcedRelease> QuorumLock::force_release(const std::string& name,
                                                     bool include_foreign) {
  node::Outcomes outcomes =
      nodes_.run(std::vector<node::Call>{force_release_call(name, include_foreign)}).front();
  std::vector<ForcedRelease> report;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    ForcedRelease r{nodes_.address(i).display(), {}, std::nullopt};
    const auto& o = outcomes[i];
    if (!o) {
      r.error = node_error(i, o.error());
    } else if (o->is_error()) {
      r.error = node_error(i, errc::server_error, o->str);
    } else if (const auto outcome = force_outcome(o->str);
               outcome && o->type == resp::Reply::Type::string) {
      r.outcome = outcome;
    } else {
      r.error = node_error(i, errc::protocol_error, "unexpected reply to force_release");
    }
    report.push_back(std::move(r));
  }
  return report;
}

}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
#include "lock/membership.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "engine/run.h"
#include "lock/calls.h"
#include "lock/keys.h"
#include "lock/owner.h"
#include "lock/tally.h"
#include "lock/validity.h"
#include "node/server_identity.h"
#include "scripts/script.h"

namespace dlock::lock {

struct BootIdentity {
  std::string run_id;
  std::string uptime_seconds;
  // The servers behind the node, by their own run_ids: the run_id for one server; a cluster's
  // or a sentinel node's name them in "servers:" (node/server_identity.h).
  std::vector<std::string> servers;

  bool shares_a_server_with(const BootIdentity& other) const {
    for (const auto& s : servers) {
      if (std::find(other.servers.begin(), other.servers.end(), s) != other.servers.end()) {
        return true;
      }
    }
    return false;
  }
};

namespace {

// What a greeting learns of one node from its INFO (default sections): its boot identity, or
// why it must not vote whatever the others say.
struct NodeFacts {
  std::optional<BootIdentity> id;
  std::string excluded;  // non-empty: never votes, and why
};

// The server's evicted_keys, if its INFO says.
std::optional<std::uint64_t> evicted_keys(const Result<resp::Reply>& r) {
  if (!r || r->type != resp::Reply::Type::string) return std::nullopt;
  const std::string n = node::info_field(r->str, "evicted_keys");
  if (n.empty()) return std::nullopt;
  return std::strtoull(n.c_str(), nullptr, 10);
}

NodeFacts parse_info(const Result<resp::Reply>& r, bool allow_eviction) {
  if (r && r->is_error() &&
      (r->is_error_code("NOPERM") || r->str.find("unknown command") != std::string::npos)) {
    // Denied by an ACL (INFO is in @dangerous) or renamed away: no way to tell this server's
    // restarts, role or eviction policy, so it cannot vote until INFO is allowed.
    return {std::nullopt, "INFO refused (" + r->str +
                              "): dlock reads INFO to tell restarts, replicas and eviction; "
                              "allow INFO for this user (ACL +info) and keep it named INFO"};
  }
  if (!r || r->type != resp::Reply::Type::string) return {};
  auto field = [&](std::string_view name) { return node::info_field(r->str, name); };
  if (const std::string role = field("role"); !role.empty() && role != "master") {
    // A replica may accept writes (replica-read-only no) that its master never sees.
    return {std::nullopt, "a replica (role:" + role +
                              "): only a master may hold locks; name the master, or use a "
                              "redis-sentinel:// URL that follows it"};
  }
  if (!allow_eviction && node::may_evict(r->str)) {
    return {std::nullopt,
            "may evict lock keys (maxmemory " + field("maxmemory") + ", maxmemory-policy " +
                field("maxmemory_policy") +
                "): an evicted lock is free to a second owner; set maxmemory-policy noeviction "
                "(or give locks a server of their own that has it), or accept the risk with "
                "ClientOptions::allow_eviction / --allow-eviction"};
  }
  BootIdentity id{field("run_id"), field("uptime_in_seconds"), {}};
  if (id.run_id.empty() || id.uptime_seconds.empty()) return {};
  const std::string servers = field("servers");
  if (servers.empty()) {
    // One server (a cluster or sentinel node names its servers, and reports their identity
    // digest already). A replica promoted to master takes a new replication id: the same
    // address, maybe the same run_id's uptime, but not the same keys. When it was promoted is
    // not known (second_repl_offset is set only by a promotion), so its uptime is taken as 0:
    // a quarantine then starts at the first greeting that sees it, never too early.
    if (const std::string replid = field("master_replid"); !replid.empty()) {
      id.run_id += "/" + replid;
      const std::string second = field("second_repl_offset");
      if (!second.empty() && second != "-1") id.uptime_seconds = "0";
    }
    id.servers.push_back(id.run_id.substr(0, id.run_id.find('/')));
  } else {
    for (std::size_t at = 0; at <= servers.size();) {
      const auto comma = std::min(servers.find(',', at), servers.size());
      id.servers.push_back(servers.substr(at, comma - at));
      at = comma + 1;
    }
  }
  return {std::move(id), {}};
}

// Why a greeting's answers could not be trusted, for the errors of the nodes left unchecked.
std::string unsettled_text(const BootReport& report, const GreetingVerdict& verdict) {
  if (verdict.brand_new) {
    // Answered is not enough: a node counts once its INFO named its boot too (an INFO that
    // timed out leaves an answering node unidentified), and no other node saw it boot.
    return "a lock set's first greeting needs an answer from every node, each identified by "
           "its INFO (" +
           std::to_string(report.told) + " answered, " + std::to_string(verdict.fresh) +
           " identified and new; ClientOptions::start_from_quorum starts it from a quorum)";
  }
  return "too few nodes answered that can vouch for the others (" +
         std::to_string(verdict.counted) +
         " in use and not restarted recently): waiting for the nodes that remember";
}

// 15 random decimal digits (48 bits): announcement members are "ttl.<digits>", and a dlock
// before the retraction reads one with tonumber (hello.lua), so digits only.
std::string random_digits() {
  std::string digits = std::to_string(std::stoull(random_hex(6), nullptr, 16));
  return std::string(15 - digits.size(), '0') + digits;
}

}  // namespace

Membership::Membership(node::Fanout& nodes, double drift_factor, Observer* observer,
                       MembershipOptions options)
    : nodes_(nodes),
      drift_factor_(drift_factor),
      observer_(observer),
      options_(options),
      mu_([&nodes](std::function<void()> f) { nodes.post(std::move(f)); }),
      checked_epoch_(nodes.size(), kUnchecked),
      attempted_epoch_(nodes.size(), kUnchecked),
      retry_at_(nodes.size()),
      quarantine_until_(nodes.size(), Clock::time_point::min()),
      duplicate_(nodes.size(), false),
      excluded_(nodes.size()),
      announcement_prefix_(random_digits()),
      checked_id_(nodes.size()) {}

Membership::View Membership::refresh(std::chrono::milliseconds ttl) {
  return engine::run_sync(refresh_task(ttl));
}

bool Membership::greeting_due(std::chrono::milliseconds ttl, Clock::time_point now) {
  // Greet again when the ttl grows, or a connection is new and not yet greeted: at once after
  // a reconnect, else (a node that did not answer) at most once a second.
  // Also now and then: a node's configuration (eviction, role) can change under a client.
  bool stale = ttl > announced_ttl_ || now >= recheck_at_ ||
               now + ttl + drift(ttl, drift_factor_) > announced_until_;
  // A connection the server closed while it was idle (a server's `timeout`, CLIENT KILL) would
  // be remade by the round itself, whose answer would then come on an epoch not greeted and
  // not count: greet first, on the new connection.
  for (std::size_t i = 0; i < nodes_.size() && !stale; ++i) {
    const std::uint64_t epoch = nodes_.epoch(i);
    stale = (epoch != checked_epoch_[i] && (epoch != attempted_epoch_[i] || now >= retry_at_[i])) ||
            (epoch == checked_epoch_[i] && nodes_.closed_by_server(i));
  }
  return stale;
}

std::optional<Membership::View> Membership::try_refresh(std::chrono::milliseconds ttl,
                                                        bool attempt) {
  const auto lock = mu_.try_lock_now();
  if (!lock || greeting_due(ttl, Clock::now())) return std::nullopt;
  View view = view_locked(ttl);
  if (view.announcement_lapsed) return std::nullopt;  // refresh_task greets
  if (attempt) ++in_flight_;
  return view;
}

engine::Task<Membership::View> Membership::refresh_task(std::chrono::milliseconds ttl,
                                                        bool attempt) {
  auto lock = co_await mu_.lock();
  const bool stale = greeting_due(ttl, Clock::now());
  if (stale) {
    // Only this call's ttl is announced: a lease granted earlier is covered by the records of
    // its grant and of its renewals, and a ttl announced again at every greeting (this
    // client's largest, or the largest it learned) would keep the record, and with it every
    // quarantine, as long as the longest-lived client runs.
    auto greeting = greet(ttl);
    co_await std::move(greeting);
  }
  View view = view_locked(ttl);
  // The clock moved on since greeting_due(): an announcement that was live enough then can lapse
  // before a lease granted now would end (a thread preempted between the two readings, just as
  // one ttl had passed). Greet now rather than refuse with no node voting
  // (Issue12Test.NamesLeaveNoKeysBehindAndTokensStillGrow failed so under TSan).
  if (!stale && view.announcement_lapsed) {
    auto greeting = greet(ttl);
    co_await std::move(greeting);
    view = view_locked(ttl);
  }
  // Counted under the same lock as the view: a retraction decided after this sees it.
  if (attempt) ++in_flight_;
  co_return view;
}

std::optional<std::vector<std::string>> Membership::try_settle(bool refused,
                                                               std::chrono::milliseconds granted) {
  const auto lock = mu_.try_lock_now();
  if (!lock) return std::nullopt;
  return settle_locked(refused, granted);
}

engine::Task<std::vector<std::string>> Membership::settle_task(bool refused,
                                                               std::chrono::milliseconds granted) {
  auto lock = co_await mu_.lock();
  co_return settle_locked(refused, granted);
}

std::vector<std::string> Membership::settle_locked(bool refused,
                                                   std::chrono::milliseconds granted) {
  if (in_flight_ > 0) --in_flight_;
  refused_ = refused_ || refused;
  const auto now = Clock::now();
  std::erase_if(granted_, [now](const Granted& g) { return g.until <= now; });
  // One entry per ttl, the latest grant's: an earlier grant of the same ttl lapses first, so
  // it never decides what take_announcements() sees as held. Without this the list held every
  // grant of the last ttl (30 s by default), scanned at every settle: a cost per lock cycle
  // that grew with the cycles per ttl.
  if (granted.count() > 0) {
    const auto same = std::find_if(granted_.begin(), granted_.end(),
                                   [granted](const Granted& g) { return g.ttl == granted; });
    if (same == granted_.end()) {
      granted_.push_back(Granted{granted, now + granted});
    } else {
      same->until = now + granted;
    }
  }
  return take_announcements();
}

void Membership::begin_wait() {
  waits_.fetch_add(1);
}

engine::Task<std::vector<std::string>> Membership::end_wait_task() {
  waits_.fetch_sub(1);
  auto lock = co_await mu_.lock();
  co_return take_announcements();
}

std::vector<std::string> Membership::take_announcements() {
  std::vector<std::string> members;
  // Only with nothing in flight: an attempt still running may have a grant that runs late on
  // some node, and only the announcement makes its ttl known there before a greeting reads it
  // (docs/safety.md, "A grant that runs late"). A decided lease is recorded by its grants and
  // renewals; a refused one has nothing to protect. Not while a wait goes on either: its next
  // attempt would only announce again (a cost, not a matter of safety: waits_ is read without
  // mu_, and an announcement taken back early is announced again before any vote).
  if (!refused_ || in_flight_ > 0 || waits_.load() > 0) return members;
  // Nor while a lease of this client with an announced ttl or a larger one may live: its grants
  // and renewals keep that ttl recorded as long anyway, and the next attempt would only
  // announce again (a cost, not a matter of safety).
  const auto now = Clock::now();
  std::chrono::milliseconds announced{0};
  std::chrono::milliseconds held{0};
  for (const auto& a : announcements_) {
    if (a.lapsed > now) announced = std::max(announced, a.ttl);
  }
  for (const auto& g : granted_) {
    if (g.until > now) held = std::max(held, g.ttl);
  }
  if (announced.count() > 0 && held >= announced) return members;
  refused_ = false;
  for (auto& a : announcements_) {
    if (a.lapsed > now) members.push_back(std::move(a.id));
  }
  announcements_.clear();
  // Nothing of this client's is announced any more: the next round greets before it votes.
  announced_ttl_ = std::chrono::milliseconds(0);
  announced_until_ = Clock::time_point{};
  announced_id_.clear();
  return members;
}

std::string Membership::next_announcement(std::chrono::milliseconds ttl) {
  // Those surely gone from every node need no retraction: forgotten, so the list stays short.
  const auto now = Clock::now();
  std::erase_if(announcements_, [now](const Announcement& a) { return a.lapsed <= now; });
  std::string id = announcement_prefix_ + std::to_string(++greetings_);
  announcements_.push_back(Announcement{id, {}, std::chrono::milliseconds(0)});
  keep_announcement(ttl);
  return id;
}

void Membership::keep_announcement(std::chrono::milliseconds ttl) {
  // Recorded for twice the ttl by the nodes' clocks: gone after that, a drift and a second for
  // the request to arrive (one that runs later still, on a stalled connection, outlives its
  // retraction: a longer quarantine, never a shorter one).
  auto& a = announcements_.back();
  a.ttl = std::max(a.ttl, ttl);
  a.lapsed = std::max(
      a.lapsed, Clock::now() + 2 * ttl + drift(2 * ttl, drift_factor_) + std::chrono::seconds(1));
}

std::string Membership::announcement_member(std::chrono::milliseconds ttl, const std::string& id) {
  return ttl.count() > 0 ? std::to_string(ttl.count()) + "." + id : "0";
}

Membership::View Membership::view_locked(std::chrono::milliseconds ttl) const {
  View view;
  view.basis = basis_locked();
  // A ttl not yet announced to a quorum: a node that restarts while such a lock lives would
  // be quarantined for a shorter ttl than the lock's. Nobody votes until it is announced.
  view.ttl_unannounced = ttl > announced_ttl_;
  if (view.ttl_unannounced) return view;
  view.judged_at = Clock::now();
  // A lease granted now must end while this client's last trusted announcement lives on the
  // nodes that vote (a grant that runs late there is read by others meanwhile); a greeting
  // that could not be trusted renewed nothing, so nobody votes once it would lapse.
  view.announcement_lapsed = view.judged_at + ttl + drift(ttl, drift_factor_) > announced_until_;
  return view;
}

std::shared_ptr<const Membership::Basis> Membership::basis_locked() const {
  // Compared rather than marked stale where the state changes: nothing that changes it can
  // forget to, and comparing a few entries per node costs far less than the copies did.
  const auto same = [this](const Basis& b) {
    return b.duplicate == duplicate_ && b.epochs == checked_epoch_ && b.excluded == excluded_ &&
           b.unsettled == unsettled_ && b.announcement == announced_id_ &&
           b.quarantine_until == quarantine_until_;
  };
  if (!basis_ || !same(*basis_)) {
    basis_ = std::make_shared<const Basis>(
        Basis{duplicate_, checked_epoch_, excluded_, unsettled_, announced_id_, quarantine_until_});
  }
  return basis_;
}

engine::Task<Membership::Identities> Membership::identify() {
  // A run_id belongs to a connection only if the connection is the same before INFO and after
  // hello: a reconnect in between may have reached another process. The first INFO on a new
  // client also makes the connections (their epochs change), so INFO is asked again, a few
  // times at most, until the epochs hold still around it.
  Identities found{std::vector<std::uint64_t>(nodes_.size()),
                   std::vector<std::optional<BootIdentity>>(nodes_.size())};
  std::vector<std::string> excluded(nodes_.size());
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) found.epochs[i] = nodes_.epoch(i);
    // The default sections: server (run_id, uptime), replication (role, replication ids),
    // memory (maxmemory, its policy), stats (evicted_keys).
    node::ScriptRound info(nodes_, {"INFO"});
    node::Outcomes infos = co_await info;
    bool settled = true;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      NodeFacts facts = parse_info(infos[i], options_.allow_eviction);
      if (const auto evicted = evicted_keys(infos[i]); evicted && observer_ != nullptr) {
        observer_->node_health(
            NodeHealthEvent{i, nodes_.address(i).display(), *evicted, facts.excluded});
      }
      found.ids[i] = std::move(facts.id);
      excluded[i] = std::move(facts.excluded);
      // Also an INFO that failed while its connection was made within the round (the connect,
      // on a loaded machine, outlasting the node timeout): the next round asks the new
      // connection. Else the greeting went on without that node's identity, and dropped its
      // hello answer as one from a changed connection: a new client's first acquisition failed
      // "not greeted (0 answered)" (26 tests of the dev suite at 16 jobs, on a machine whose
      // system calls cost 1 µs). A connect that ends only after the round still fails this
      // greeting; greet() tries again if it was the client's first.
      found.timed_out = found.timed_out || (!infos[i] && infos[i].error().is(errc::timeout));
      if (nodes_.epoch(i) != found.epochs[i]) {
        found.ids[i].reset();
        excluded[i].clear();
        settled = false;
      }
    }
    if (settled) break;
  }
  // A node that must not vote is known as such on this connection (its configuration is read
  // again at the next periodic greeting); it takes no part in the boot records.
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (excluded[i].empty()) continue;
    excluded_[i] = std::move(excluded[i]);
    checked_epoch_[i] = found.epochs[i];
  }
  co_return found;
}

void Membership::drop_answers_of_changed_connections(node::Outcomes& answers,
                                                     const Identities& found) const {
  // An answer from another process than the one INFO identified (the connection changed in
  // between: a restart, a moved address) says nothing about the boot the greeting named: an
  // empty process would pass for a fresh node under a run_id every member knows.
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_.epoch(i) != found.epochs[i]) {
      answers[i] = Error(errc::io_error, "the connection changed since INFO");
    }
  }
}

engine::Task<bool> Membership::greet(std::chrono::milliseconds max_ttl) {
  // The first greeting of a strict set needs every node, and one connect or answer slower than
  // the node timeout (a busy machine, a node far away) failed a new client's first acquisition
  // (RedlockTest.AFirstConnectionSlowerThanTheNodeTimeout...). So until a greeting is trusted,
  // within the client's first connect timeout (a connect may take that long), a greeting that
  // was not trusted and waited for nodes that timed out is tried again. Not one whose timeouts
  // came at once (a node in reconnect backoff fails with its last connect's timeout): that
  // would spin. Later greetings need only a quorum and do not wait for a node that is down.
  if (!first_contact_until_) first_contact_until_ = Clock::now() + options_.connect_timeout;
  // Digits new to this greeting, the same in each try: it announces "<max_ttl>.<id>"
  // (hello.lua), and a try again only makes the record end later.
  const std::string id = next_announcement(max_ttl);
  for (;;) {
    const auto started = Clock::now();
    bool timed_out = false;
    auto once = greet_once(max_ttl, id, timed_out);
    if (co_await std::move(once)) co_return true;
    const auto now = Clock::now();
    // Without a node timeout given, kUnsettledRetry: never a try straight after another.
    const auto waited = options_.node_timeout.count() > 0 ? options_.node_timeout : kUnsettledRetry;
    if (trusted_once_ || !timed_out || now >= *first_contact_until_ || now - started < waited) {
      co_return false;
    }
  }
}

engine::Task<bool> Membership::greet_once(std::chrono::milliseconds max_ttl, const std::string& id,
                                          bool& timed_out) {
  auto identifying = identify();
  const Identities found = co_await std::move(identifying);
  timed_out = found.timed_out;
  const auto& ids = found.ids;
  std::vector<std::string> args{announcement_member(max_ttl, id), std::to_string(nodes_.size()),
                                "greet"};
  std::vector<std::size_t> greeted;  // node indexes, in the order of the hello pairs
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!ids[i]) continue;
    greeted.push_back(i);
    args.insert(args.end(), {ids[i]->run_id, ids[i]->uptime_seconds});
  }
  const auto asked = Clock::now();
  // The announcement lapses twice its ttl after this try sends it, not after the greeting began.
  keep_announcement(max_ttl);
  node::ScriptRound hello(nodes_, hello_call(std::move(args)));
  node::Outcomes answers = co_await hello;
  for (const auto& a : answers) timed_out = timed_out || (!a && a.error().is(errc::timeout));
  drop_answers_of_changed_connections(answers, found);
  // The nodes measured boot ages when they ran the script, at most now: a boot counted back
  // from `asked` would be placed too early by however long the requests took to get there.
  const auto answered_at = Clock::now();
  const BootReport report = tally_hello(answers, greeted);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    attempted_epoch_[i] = found.epochs[i];
    retry_at_[i] = asked + std::chrono::seconds(1);
  }
  recheck_at_ = asked + std::chrono::seconds(1);
  const GreetingVerdict verdict =
      judge_greeting(report, nodes_.size(), nodes_.quorum(), options_.start_from_quorum);
  if (!verdict.trusted) {
    // Nothing votes until a greeting is trusted: try again soon, not in a second (a node that
    // does not answer costs the node timeout per try, but nothing works meanwhile anyway).
    unsettled_ = unsettled_text(report, verdict);
    for (auto& at : retry_at_) at = asked + kUnsettledRetry;
    recheck_at_ = asked + kUnsettledRetry;
    co_return false;
  }
  unsettled_.clear();
  trusted_once_ = true;
  const auto largest = std::max(max_ttl, report.max_ttl);
  // Joining nodes record the largest ttl learned under the same digits.
  keep_announcement(largest);
  auto joining = join(greeted, ids, report, announcement_member(largest, id));
  const std::vector<bool> member = co_await std::move(joining);
  admit(greeted, found, member, report, answered_at, largest);
  auto reseeding = reseed_floors(report);
  (void)co_await std::move(reseeding);
  // What this greeting wrote on the nodes, not what it learned: a lease of a larger ttl needs
  // its own announcement (a late grant of it may run after another client read a node).
  announced_ttl_ = max_ttl;
  announced_id_ = id;
  announced_until_ = asked + 2 * max_ttl - drift(2 * max_ttl, drift_factor_);
  recheck_at_ = asked + kRecheckEvery;
  co_return true;
}

void Membership::admit(const std::vector<std::size_t>& greeted, const Identities& found,
                       const std::vector<bool>& member, const BootReport& report,
                       Clock::time_point answered_at, std::chrono::milliseconds largest) {
  const auto& ids = found.ids;
  // Only the nodes that hold this greeting's announcement vote until it lapses: one that missed
  // it (no answer, a failed join, no INFO) could grant a lease whose ttl nobody else recorded
  // in time (a late grant after another client's greeting). It is greeted again.
  std::vector<bool> confirmed(nodes_.size());
  for (std::size_t k = 0; k < greeted.size(); ++k) confirmed[greeted[k]] = member[k];
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!confirmed[i] && excluded_[i].empty()) checked_epoch_[i] = kUnchecked;
  }
  for (std::size_t k = 0; k < greeted.size(); ++k) {
    const std::size_t i = greeted[k];
    // Reconnected meanwhile, or not a member (it did not answer, or its join failed): it does
    // not vote, and is greeted again.
    if (nodes_.epoch(i) != found.epochs[i] || !member[k]) continue;
    excluded_[i].clear();
    // One server named twice (two addresses of one host, or a server URL and a cluster or
    // sentinel URL that reach it) would count one vote twice.
    duplicate_[i] = false;
    for (std::size_t j = 0; j < k; ++j) {
      if (ids[greeted[j]]->shares_a_server_with(*ids[i])) duplicate_[i] = true;
    }
    if (const auto age = report.boot_age[k]; age && *age < largest) {
      quarantine(i, answered_at, largest - *age);
    } else if (checked_epoch_[i] == found.epochs[i] && !checked_id_[i].empty() &&
               checked_id_[i] != ids[i]->run_id) {
      // Another server on the same connection (a proxy that kept it) that no node reports as
      // booted recently: it may lack keys all the same; out for the largest live ttl.
      quarantine(i, answered_at, largest);
    }
    checked_id_[i] = ids[i]->run_id;
    checked_epoch_[i] = found.epochs[i];
  }
}

engine::Task<std::vector<bool>> Membership::join(
    const std::vector<std::size_t>& greeted, const std::vector<std::optional<BootIdentity>>& ids,
    const BootReport& report, std::string largest) {
  std::vector<bool> member(greeted.size());
  bool anyone = false;
  for (std::size_t k = 0; k < greeted.size(); ++k) {
    member[k] = report.answered[k] && report.in_use[k];
    anyone = anyone || (report.answered[k] && !report.in_use[k]);
  }
  if (!anyone) co_return member;
  // Every boot with the age this greeting learned: the new member reports a recent restart as
  // the older members do. Sent to every node: an old member only gains records it lacked.
  std::vector<std::string> args{std::move(largest), std::to_string(nodes_.size()), "join"};
  for (std::size_t k = 0; k < greeted.size(); ++k) {
    const auto& age = report.boot_age[k];
    args.insert(args.end(), {ids[greeted[k]]->run_id, std::to_string(age ? age->count() : -1)});
  }
  node::ScriptRound joined(nodes_, hello_call(std::move(args)));
  const node::Outcomes outcomes = co_await joined;
  for (std::size_t k = 0; k < greeted.size(); ++k) {
    const auto& r = outcomes[greeted[k]];
    const bool ok = r && r->is_array() && r->elements.size() == 2 && r->elements[1].is_integer() &&
                    r->elements[1].integer == 1;
    member[k] = member[k] || (report.answered[k] && ok);
  }
  co_return member;
}

engine::Task<bool> Membership::reseed_floors(const BootReport& report) {
  // A node without a floor counts from its clock (acquire.lua), above every floor: left alone.
  const auto behind = [&](std::uint64_t floor) {
    return floor > 0 && floor < report.largest_floor;
  };
  if (std::none_of(report.floors.begin(), report.floors.end(), behind)) co_return true;
  node::ScriptRound raised(nodes_, floor_raise_call(report.largest_floor));
  // A node it misses is raised by the next greeting or grant.
  const node::Outcomes outcomes = co_await raised;
  co_return std::all_of(outcomes.begin(), outcomes.end(),
                        [](const auto& o) { return o.has_value(); });
}

void Membership::quarantine(std::size_t i, Clock::time_point from, std::chrono::milliseconds wait) {
  // Booted `largest - wait` ago by the reporting node's clock; allow for its drift against ours.
  const auto until = from + wait + drift(wait, drift_factor_);
  if (observer_ != nullptr) {
    // Once per quarantine: one that starts now, not one a later greeting lengthens.
    const auto now = Clock::now();
    if (until > now && quarantine_until_[i] <= now) {
      observer_->quarantined(
          QuarantineEvent{i, nodes_.address(i).display(),
                          std::chrono::ceil<std::chrono::milliseconds>(until - now)});
    }
  }
  quarantine_until_[i] = std::max(quarantine_until_[i], until);
}

std::string Membership::never_votes(const Result<resp::Reply>& info) const {
  return parse_info(info, options_.allow_eviction).excluded;
}

std::vector<std::chrono::milliseconds> Membership::quarantine() {
  return engine::run_sync(quarantine_task());
}

engine::Task<std::vector<std::chrono::milliseconds>> Membership::quarantine_task() {
  auto refreshing = refresh_task(std::chrono::milliseconds(0));
  (void)co_await std::move(refreshing);
  auto lock = co_await mu_.lock();
  const auto now = Clock::now();
  std::vector<std::chrono::milliseconds> left;
  for (const auto& until : quarantine_until_) {
    left.push_back(until > now ? std::chrono::ceil<std::chrono::milliseconds>(until - now)
                               : std::chrono::milliseconds(0));
  }
  co_return left;
}

}  // namespace dlock::lock

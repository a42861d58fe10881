// SPDX-License-Identifier: MIT
// Membership: keeps a node that restarted recently out of quorums, seed 001's "delayed
// restart" made automatic.
//
// A node that restarted may have lost the keys of live locks (no persistence, or the last
// second of an fsync-everysec AOF). It must not vote until every lock it may have forgotten
// has expired: the largest ttl in use after its restart. Uptime alone cannot tell a restart
// from a first boot, so the nodes remember the boot identities (INFO run_id) they were told of
// in `dlock:boots`: when a client (re)connects, it tells every node the run_ids and uptimes it
// sees, and a node that was already in use reports a run_id it never heard of as a boot that
// happened while it was in use (hello.lua). Identities are run_ids, not addresses: every
// client is told the same whatever it calls the nodes. A fresh cluster has no records and is
// usable at once; a node new to a lock set that is in use sits out until the largest ttl has
// passed since its boot (safe, and at most one ttl).
//
// The decision needs a quorum of answers, and the largest ttl is the largest any of them
// names: the largest ttl was announced to a quorum, which meets every other quorum.
//
// Unprotected: a majority restarting empty at once (no records survive on a quorum), and a
// FLUSHALL (the run_id does not change). See docs/safety.md.
//
// Thread-safety: refresh() and quarantine() may be called from any thread but an io thread;
// refresh_task() is a Task (engine/task.h), serialized with the others by an AsyncMutex.
#pragma once

#include <dlock/observer.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/async_mutex.h"
#include "engine/task.h"
#include "node/fanout.h"

namespace dlock::lock {

struct BootIdentity;  // one node's boot identity as INFO gives it (membership.cc)
struct BootReport;    // lock/tally.h

struct MembershipOptions {
  // A node whose maxmemory-policy may evict keys with a ttl still votes (ClientOptions).
  bool allow_eviction = false;
  // A lock set none of whose nodes is in use starts once a quorum answers, not all (ClientOptions).
  bool start_from_quorum = false;
  // How long after its first greeting began a client keeps greeting while nodes it needs time
  // out (a connect or an answer slower than the node timeout), until one greeting is trusted:
  // ClientOptions::connect_timeout; 0: one try per greeting. A try is repeated only if it took
  // at least node_timeout (ClientOptions), so that its timeouts were waited for.
  std::chrono::milliseconds connect_timeout{0};
  std::chrono::milliseconds node_timeout{0};
};

class Membership {
 public:
  using Clock = std::chrono::steady_clock;

  // `observer` (may be null) hears of every quarantine that starts or grows.
  Membership(node::Fanout& nodes, double drift_factor, Observer* observer = nullptr,
             MembershipOptions options = {});

  // How often the nodes are greeted again while nothing else asks for it: a node's role or
  // eviction policy can change under a running client (a failover, CONFIG SET).
  static constexpr std::chrono::seconds kRecheckEvery{30};
  // View::epochs for a node not greeted on any connection yet (or that missed the last one).
  static constexpr std::uint64_t kUnchecked = ~std::uint64_t{0};
  // How soon a greeting whose answers could not be trusted is tried again.
  static constexpr std::chrono::milliseconds kUnsettledRetry{100};

  // What the greetings decided, as a view reads it: changed only by a greeting (or a
  // retraction), so every view shares one until then instead of copying its vectors and
  // strings per attempt (issue 32).
  struct Basis {
    std::vector<bool> duplicate;  // the same server (run_id) as an earlier node: never votes
    std::vector<std::uint64_t> epochs;
    // Non-empty: node i never votes (a replica, a server that may evict keys), and why.
    std::vector<std::string> excluded;
    // Non-empty: the last greeting's answers could not be trusted (why); nodes not greeted
    // since do not vote.
    std::string unsettled;
    // The digits of the announcement these votes rely on (dlock:max-ttl members
    // "<ttl>.<digits>"): a cluster node records an acquisition's ttl in its greeting's record
    // under them, so that a retraction takes that back too (node::Call::announcement).
    std::string announcement;
    std::vector<Clock::time_point> quarantine_until;  // per node: out of quorums until then

    bool operator==(const Basis&) const = default;
  };

  // Which nodes may vote now. Valid for the connection epochs it names: a vote from a node
  // whose connection changed since is not counted (it may be a new process).
  struct View {
    std::shared_ptr<const Basis> basis;
    Clock::time_point judged_at;  // when the votes were judged (quarantines end by then)
    // The ttl asked for was not announced to a quorum yet (their greetings failed): no votes.
    bool ttl_unannounced = false;
    // The last trusted announcement would lapse before a lease of the ttl asked for ends: no
    // votes until a greeting renews it.
    bool announcement_lapsed = false;

    bool duplicate(std::size_t i) const { return basis->duplicate[i]; }
    std::uint64_t epoch(std::size_t i) const { return basis->epochs[i]; }
    const std::string& excluded(std::size_t i) const { return basis->excluded[i]; }
    const std::string& unsettled() const { return basis->unsettled; }
    const std::string& announcement() const { return basis->announcement; }
    // Whether node i votes, its connection epoch aside.
    bool votes(std::size_t i) const {
      return !ttl_unannounced && !announcement_lapsed && judged_at >= basis->quarantine_until[i] &&
             !duplicate(i) && excluded(i).empty();
    }
    // True if node i may count for a quorum, given its connection epoch now.
    bool may_vote(const node::Fanout& nodes, std::size_t i) const {
      return votes(i) && nodes.epoch(i) == epoch(i);
    }
    // True if node i's confirmation of an extension counts. A quarantined node's does: its
    // "renewed" says the key with this very hold is there (renew.lua checks the hold id), so
    // on that node nobody else can be granted the lock while it lives. The quarantine is
    // against grants on a node that may have forgotten keys, not against keys it still has; a
    // failed-over node whose replica had the key lets its holder keep the lock.
    bool may_extend(const node::Fanout& nodes, std::size_t i) const {
      return !ttl_unannounced && !duplicate(i) && excluded(i).empty() && nodes.epoch(i) == epoch(i);
    }
  };

  // Before using a lock with `ttl`: greets the nodes again (two round trips) if a connection
  // is new, `ttl` is larger than the last greeting announced, or that announcement would lapse
  // before a lease of `ttl` ends; else only reads the current view. A greeting announces only
  // `ttl`. Nobody votes for a ttl that could not be announced to a quorum, nor once the last
  // trusted announcement would lapse before such a lease ends.
  //
  // `attempt`: the view is for a round that may grant or renew under the announcement (an
  // acquisition, a renewal); it counts as in flight until settle_task(), and no announcement of
  // this client is retracted meanwhile (a grant of it may still run late on some node).
  View refresh(std::chrono::milliseconds ttl);
  engine::Task<View> refresh_task(std::chrono::milliseconds ttl, bool attempt = false);
  // co_await refreshing(ttl, attempt): refresh_task's view, without a Task when no greeting is
  // due and nobody holds the state (every lock cycle but the first in a while).
  struct RefreshLater {
    Membership* membership;
    std::chrono::milliseconds ttl;
    bool attempt;
    engine::Task<View> operator()() const { return membership->refresh_task(ttl, attempt); }
  };
  engine::Quick<View, RefreshLater> refreshing(std::chrono::milliseconds ttl, bool attempt) {
    return {try_refresh(ttl, attempt), RefreshLater{this, ttl, attempt}};
  }
  // settle_task's work at once if nobody holds the state; empty if somebody does.
  std::optional<std::vector<std::string>> try_settle(
      bool refused, std::chrono::milliseconds granted = std::chrono::milliseconds(0));

  // The round of a refresh_task(ttl, true) is decided; `refused`: it granted nothing (an
  // acquisition that failed). Once a refusal happened and nothing is in flight, returns this
  // client's announcements to take back (max_ttl_retract.lua, lock/quorum_lock.cc), and the
  // next round greets again before it votes: a refused attempt records nothing that outlives
  // it (the digits of each: max_ttl_retract.lua's ARGV). Empty otherwise (nothing to send).
  // `granted`: the ttl of a lease it granted or renewed (zero: none); while such a lease may
  // live, announcements of its ttl or less are kept (its records keep that ttl anyway).
  engine::Task<std::vector<std::string>> settle_task(
      bool refused, std::chrono::milliseconds granted = std::chrono::milliseconds(0));
  // A wait (lock/wait.h) of this client begins and ends: its refused attempts keep their
  // announcements for its next attempt, and its end returns what settle_task() held back.
  void begin_wait();
  engine::Task<std::vector<std::string>> end_wait_task();

  // Why a node whose INFO (default sections) says this never votes (a replica, an eviction
  // policy this client does not accept), or empty.
  std::string never_votes(const Result<resp::Reply>& info) const;

  // Per node, how long it stays out of quorums (zero: it votes). Refreshes as above.
  std::vector<std::chrono::milliseconds> quarantine();
  engine::Task<std::vector<std::chrono::milliseconds>> quarantine_task();

 private:
  // What INFO says of every node, on which connection epoch. Under mu_.
  struct Identities {
    std::vector<std::uint64_t> epochs;
    std::vector<std::optional<BootIdentity>> ids;
    bool timed_out = false;  // an INFO of any round ran out of time
  };
  engine::Task<Identities> identify();
  // Greets the nodes: INFO, hello.lua 'greet', and 'join' for nodes not yet members when the
  // answers can be trusted (judge_greeting); whether they could be. Until a greeting was
  // trusted, one that was not because nodes timed out is tried again, within the client's
  // first MembershipOptions::connect_timeout. Under mu_.
  engine::Task<bool> greet(std::chrono::milliseconds max_ttl);
  // One try of greet(), announcing `id`; `timed_out`: an INFO or a hello of it ran out of time.
  engine::Task<bool> greet_once(std::chrono::milliseconds max_ttl, const std::string& id,
                                bool& timed_out);
  // Per greeted node, whether it is a member after this greeting; `largest` announces the
  // largest ttl the greeting learned (a member, announce()). Under mu_.
  engine::Task<std::vector<bool>> join(const std::vector<std::size_t>& greeted,
                                       const std::vector<std::optional<BootIdentity>>& ids,
                                       const BootReport& report, std::string largest);
  // Replaces the greeting answers of nodes whose connection changed since `found` with errors.
  void drop_answers_of_changed_connections(node::Outcomes& answers, const Identities& found) const;
  // After a trusted greeting: raises every fence floor below the largest its answers reported
  // (floor_raise.lua), one round trip, only when some node is behind; true if every node
  // answered. Under mu_.
  engine::Task<bool> reseed_floors(const BootReport& report);
  // After a trusted greeting whose answers came by `answered_at`: the greeted nodes that are
  // members (`member`, per greeted node) vote again, quarantined if they booted less than
  // `largest` ago; the others are greeted again. Under mu_.
  void admit(const std::vector<std::size_t>& greeted, const Identities& found,
             const std::vector<bool>& member, const BootReport& report,
             Clock::time_point answered_at, std::chrono::milliseconds largest);
  // Keeps node i out for `wait` from `from` (plus drift). Under mu_.
  void quarantine(std::size_t i, Clock::time_point from, std::chrono::milliseconds wait);
  // The view for `ttl` from the current state. Under mu_.
  View view_locked(std::chrono::milliseconds ttl) const;
  // Whether refresh_task must greet before it can give a view for `ttl`, at `now`. Under mu_.
  bool greeting_due(std::chrono::milliseconds ttl, Clock::time_point now);
  // refreshing()'s fast path: the view, if no greeting is due and mu_ is free.
  std::optional<View> try_refresh(std::chrono::milliseconds ttl, bool attempt);
  // settle_task's work. Under mu_.
  std::vector<std::string> settle_locked(bool refused, std::chrono::milliseconds granted);
  // basis_, made again first if the state it copies changed since. Under mu_.
  std::shared_ptr<const Basis> basis_locked() const;

  node::Fanout& nodes_;
  const double drift_factor_;
  Observer* const observer_;
  const MembershipOptions options_;
  engine::AsyncMutex mu_;
  // Per node, all guarded by mu_: the connection epoch last greeted (kUnchecked: never), the
  // epoch of the last attempt and when a failed attempt may be retried, and the quarantine.
  std::vector<std::uint64_t> checked_epoch_;
  std::vector<std::uint64_t> attempted_epoch_;
  std::vector<Clock::time_point> retry_at_;
  std::vector<Clock::time_point> quarantine_until_;
  std::vector<bool> duplicate_;
  std::vector<std::string> excluded_;           // why node i never votes (empty: it may)
  std::string unsettled_;                       // guarded by mu_: View::unsettled
  std::chrono::milliseconds announced_ttl_{0};  // guarded by mu_
  // Guarded by mu_: until when the last announcement lives on every node that voted since
  // (hello.lua records it for twice the ttl); an acquisition whose lease could outlive it
  // greets first.
  Clock::time_point announced_until_{};
  // Guarded by mu_: the announcements (hello.lua members "ttl.<digits>") this client wrote and
  // has not taken back, with when each has surely lapsed on every node (then it is forgotten);
  // the rounds in flight under them (refresh_task(ttl, true) not yet settled); and whether one
  // was refused since the last retraction.
  struct Announcement {
    std::string id;  // the digits of its members "<ttl>.<id>"
    Clock::time_point lapsed;
    std::chrono::milliseconds ttl;  // the largest it recorded
  };
  // Leases this client granted or renewed, by ttl, and until when they may live: one entry per
  // ttl, the latest grant's (settle_task). Under mu_.
  struct Granted {
    std::chrono::milliseconds ttl;
    Clock::time_point until;
  };
  std::vector<Granted> granted_;
  std::vector<Announcement> announcements_;
  std::size_t in_flight_ = 0;
  bool refused_ = false;
  std::atomic<std::size_t> waits_{0};  // begin_wait() less end_wait_task(); any thread
  // What settle_task() and end_wait_task() return, when a retraction is due. Under mu_.
  std::vector<std::string> take_announcements();
  // Digits unique to this client (random) and to each of its greetings (a counter): a
  // retraction names only announcements of its own, never another client's or a newer one.
  const std::string announcement_prefix_;
  std::uint64_t greetings_ = 0;  // guarded by mu_
  // The digits of a new greeting's announcement of `ttl`, kept for a retraction while it may
  // live on a node; keep_announcement() keeps the last one as long as a record of `ttl` too.
  // Under mu_.
  std::string next_announcement(std::chrono::milliseconds ttl);
  void keep_announcement(std::chrono::milliseconds ttl);
  // hello.lua's ARGV[1]: the member "<ttl>.<id>" ('0': no ttl to announce).
  static std::string announcement_member(std::chrono::milliseconds ttl, const std::string& id);
  std::string announced_id_;  // guarded by mu_: the digits of the last trusted announcement
  // Guarded by mu_: the identity each node had when it was last checked (a proxy that keeps a
  // client's connection can put another server behind the same epoch).
  std::vector<std::string> checked_id_;
  Clock::time_point recheck_at_{};  // guarded by mu_: the next periodic greeting
  // Guarded by mu_: a greeting was trusted once; until when a greeting not trusted because
  // nodes timed out is tried again (the first greeting's start and the connect timeout).
  bool trusted_once_ = false;
  std::optional<Clock::time_point> first_contact_until_;
  mutable std::shared_ptr<const Basis> basis_;  // guarded by mu_: the last views' basis
};

}  // namespace dlock::lock

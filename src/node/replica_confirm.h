// SPDX-License-Identifier: MIT
// What a high-availability node (a Redis Cluster, a Sentinel-managed master) needs to confirm
// that the record of a granted ttl reached every replica of the master that also holds the
// lock's key: a lossy failover of that master would otherwise lose the key and every record of
// its ttl together, and the promoted replica's restart quarantine would last only the ttls it
// knew (docs/safety.md, "What a failover can still hide"). The record is the bare ttl for twice
// the ttl (max_ttl_raise.lua, Call::record_call); WAIT, sent after it on the same connection,
// counts the replicas that have everything that connection wrote.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/connection.h"
#include "node/call.h"
#include "node/cluster_topology.h"
#include "node/record_window.h"
#include "resp/reply.h"

namespace dlock::node {

// Until when (this client's clock) a record raised for twice `ttl` ms by a call sent at `sent`
// lives at least: max_ttl_raise.lua writes it on the server's clock once the call runs, after
// `sent`, for two ttls of the server's clock, less what the lock's drift factor
// (Call::record_drift) takes off them (drifted_span; 1% was fixed before: a larger drift factor
// ended the record before a lease's validity, as RecordWindow::reach found).
inline net::Clock::time_point record_lives_until(net::Clock::time_point sent, std::int64_t ttl,
                                                 double drift) {
  return sent + drifted_span(2 * ttl, drift);
}

// The last bare record of a ttl confirmed on every replica (or raised on a master without any),
// in which connection epoch of the node, and until when it lives; and until when grants that
// need a confirmation are refused at once after one failed. Io thread only.
struct ReplicatedRecord {
  // WAIT holds the master's pipelined connection (renewals and every other call queue behind
  // it) for up to three quarters of a node timeout while a replica does not answer; a client
  // retrying a new ttl would hold it for good. So after a failed confirmation, the grants of the
  // next second that would need one are refused without a WAIT.
  static constexpr std::chrono::seconds kRefusedFor{1};

  std::int64_t ttl = 0;
  std::uint64_t epoch = 0;
  net::Clock::time_point until{};
  std::uint64_t refused_epoch = 0;
  net::Clock::time_point refused_until{};

  // A lease of `ttl` granted now ends while the record lives, on the same master.
  bool covers(std::int64_t lease_ttl, std::uint64_t now_epoch) const {
    return lease_ttl <= ttl && epoch == now_epoch &&
           net::Clock::now() + std::chrono::milliseconds(lease_ttl) <= until;
  }
  // A renewal round's record (Call::records_itself) on a sentinel node: as covers(), in any
  // epoch. A confirmation reached every replica the master then had, and every server of that
  // replication group keeps the record for as long as it lives (a replica promoted since, the
  // old master turned replica; one that syncs later gets it with the rest), so a new master
  // or connection does not make it less true. Right after a graceful failover the old master
  // takes seconds to become a synced replica (Sentinel reconfigures it some seconds later, then
  // a full sync): no WAIT can succeed meanwhile, and an epoch-bound cache refused every renewal
  // there (SentinelNodeTest.AGracefulFailoverMovesTheNodeOffTheOldMaster lost its lock). A
  // lease whose record ends within that gap is still refused, and lost (safe over available:
  // the old master lacks the renewals made since the switch). Not for grants: a grant's
  // confirmation stays bound to its epoch (docs/safety.md).
  bool covers_in_any_epoch(std::int64_t lease_ttl) const {
    return lease_ttl <= ttl && net::Clock::now() + std::chrono::milliseconds(lease_ttl) <= until;
  }
  bool refusing(std::uint64_t now_epoch) const {
    return refused_epoch == now_epoch && net::Clock::now() < refused_until;
  }
  void refuse(std::uint64_t now_epoch) {
    refused_epoch = now_epoch;
    refused_until = net::Clock::now() + kRefusedFor;
  }
};

// A record of `ttl` raised by a call sent at `sent`, in connection epoch `epoch`, for an
// acquisition whose node deadline is `deadline`: what the confirmation needs to know.
struct Recorded {
  std::int64_t ttl = 0;
  std::uint64_t epoch = 0;
  net::Clock::time_point sent;
  net::Clock::time_point deadline;
  bool renewal = false;  // a renewal round's record (Call::records_itself), not a grant's
  double drift = 0.01;   // the lock's drift factor (Call::record_drift)
};

class ServerNode;

// A grant waiting for its record and for the count of the replicas, asked at once (one round
// trip, not two: every round trip taken here is taken from WAIT's share of the node timeout).
// WAIT counts acknowledgements from any replicas, so it waits for the promotable ones and the
// connected ones together (replicas_to_wait_for): the master's INFO replication, read on the
// connection that wrote the record, names the connected ones.
struct Confirmation {
  using Addresses = std::optional<std::vector<std::string>>;  // "ip:port"; nullopt: failed
  std::optional<Result<resp::Reply>> raised;                  // the record's reply, once in
  std::optional<Addresses> replicas;                          // the promotable replicas, once in
  std::optional<Addresses> connected;  // the replicas connected to the writer, once in
  std::string count_error;             // why the count failed
  std::string connected_error;         // why INFO replication failed
  ServerNode* writer = nullptr;        // the server that wrote the record
  ServerNode* counted_on = nullptr;    // the server whose replicas were counted
  ServerNode* connected_on = nullptr;  // the server whose connected replicas were listed
  bool confirm = true;  // false: the record alone makes the grant count (nothing is counted)
  resp::Reply grant;
  net::Connection::Callback done;

  bool complete() const { return raised && (!confirm || (replicas && connected)); }
  // Takes the writer's reply to info_replication().
  void take_connected(const Result<resp::Reply>& r) {
    connected =
        r && r->type == resp::Reply::Type::string ? connected_replicas(r->str) : std::nullopt;
    if (!*connected) connected_error = r ? r->str : r.error().message();
  }
  // How many replicas WAIT must count (both lists in).
  std::size_t to_wait_for() const { return replicas_to_wait_for(**replicas, **connected); }
  // The node's answer if the record failed (the grant does not count); nullopt: recorded.
  std::optional<Result<resp::Reply>> not_recorded() {
    if (*raised && !(*raised)->is_error()) return std::nullopt;
    if (!*raised) return Result<resp::Reply>(std::move(*raised).error());
    return Result<resp::Reply>(
        Error(errc::script_error, "recording the granted ttl: " + (*raised)->str));
  }
};

// WAIT for `replicas` with the time left until `deadline`, less what its reply needs to come
// back in time: a quarter of it, and no less than 100 ms where that leaves half (an eighth
// was not enough on a busy machine: the node then answered "no reply within 500 ms" instead
// of saying why). Null when less than 2 ms are left (WAIT 0 would block for good).
inline std::shared_ptr<const Call> wait_call(std::size_t replicas,
                                             net::Clock::time_point deadline) {
  const std::int64_t left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - net::Clock::now()).count();
  if (left < 2) return nullptr;
  const std::int64_t margin =
      std::max<std::int64_t>(left / 4, std::min<std::int64_t>(left / 2, 100));
  const std::string ms = std::to_string(std::max<std::int64_t>(1, left - margin));
  return std::make_shared<const Call>(Call{nullptr, {"WAIT", std::to_string(replicas), ms}, {}});
}

inline resp::Reply refusal(std::string text) {
  resp::Reply r;
  r.type = resp::Reply::Type::error;
  r.str = std::move(text);
  return r;
}

// The node's answer when `wait` (WAIT's reply, or null when no time was left) did not confirm
// `replicas` replicas of `master` (words naming it: "slot 0's master", "the master").
inline resp::Reply not_confirmed(const resp::Reply* wait, std::size_t replicas,
                                 const std::string& master, const Recorded& recorded) {
  const std::string got = wait == nullptr      ? "no time left: 0"
                          : wait->is_integer() ? std::to_string(wait->integer)
                                               : "WAIT: " + wait->str;
  return refusal("REPLICAS " + got + " of the " + std::to_string(replicas) + " replicas of " +
                 master + " confirmed the record of a " + (recorded.renewal ? "renewed" : "new") +
                 " ttl (" + std::to_string(recorded.ttl) +
                 " ms) in time: a lossy failover could lose it with the lock, so this " +
                 (recorded.renewal ? "renewal" : "grant") + " does not count (docs/safety.md)");
}

// The node's answer to a grant (or a renewal) that needs a confirmation within a second of one
// that failed.
inline resp::Reply recently_not_confirmed(const std::string& master, bool renewal) {
  return refusal("REPLICAS the replicas of " + master + " did not confirm the record of a " +
                 (renewal ? "renewed" : "new") + " ttl a moment ago (asked again after " +
                 std::to_string(ReplicatedRecord::kRefusedFor.count()) +
                 " s): a lossy failover could lose it with the lock, so this " +
                 (renewal ? "renewal" : "grant") + " does not count (docs/safety.md)");
}

// INFO replication: the replicas connected to the master that answers (Confirmation).
inline const std::shared_ptr<const Call>& info_replication() {
  static const auto kInfo =
      std::make_shared<const Call>(Call{nullptr, {"INFO", "replication"}, {}});
  return kInfo;
}

// The node's answer when INFO replication did not name the replicas connected to `master`.
inline resp::Reply connected_not_listed(const std::string& master, const std::string& why) {
  return refusal("REPLICAS cannot list the replicas connected to " + master +
                 " (INFO replication: " + why + ")");
}

inline bool confirms(const resp::Reply& wait, std::size_t replicas) {
  return wait.is_integer() && wait.integer >= static_cast<long long>(replicas);
}

// The last step of a confirmation, WAIT on the master that wrote the record, and the cache of
// what was confirmed there: one per node (a sentinel node's master, a cluster node's slot 0
// master), the same for both but for the words naming the master and what the node does when
// that master's connection fails. Io thread only.
class RecordConfirmations {
 public:
  struct Hooks {
    std::function<bool()> closing;                  // the node is closing: replies are dropped
    std::function<std::uint64_t()> epoch;           // the node's connection epoch now
    std::function<void(const Error&)> wait_failed;  // WAIT got no reply (a refresh, say)
  };

  // `master`: the words naming the master in errors ("the master", "slot 0's master").
  RecordConfirmations(std::string master, Hooks hooks)
      : master_(std::move(master)), hooks_(std::move(hooks)) {}

  const ReplicatedRecord& record() const { return record_; }
  const std::string& master() const { return master_; }

  // WAIT for `replicas` on `master`, the server that wrote the record, on its connection (WAIT
  // counts what that connection wrote; a new connection or master changes the epoch, and the
  // confirmation then does not count), within the record's deadline: `grant` is handed on once
  // every one confirmed, else an error reply "REPLICAS ..." (and the next second's grants that
  // would need a confirmation are refused at once: ReplicatedRecord::refuse).
  void wait_for_replicas(ServerNode& master, const Recorded& recorded, std::size_t replicas,
                         resp::Reply grant, net::Connection::Callback done);
  // Every replica confirmed (or there were none to wait for): the record is cached if the
  // node's epoch is still the record's, and `grant` handed on; else an io error.
  void confirmed(const Recorded& recorded, resp::Reply grant, net::Connection::Callback& done);

 private:
  std::string master_;
  Hooks hooks_;
  ReplicatedRecord record_;
};

}  // namespace dlock::node

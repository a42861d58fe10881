// SPDX-License-Identifier: MIT
// SentinelNode: the master that Redis Sentinels know by a name, as one lock node (one vote),
// followed across failovers (redis-sentinel://host:port[,host:port...]/MASTER).
//
// - The master's address comes from SENTINEL GET-MASTER-ADDR-BY-NAME, asked of each sentinel in
//   turn, and counts only once the server itself says ROLE master: no lock command is ever sent
//   to a server before it said it is the master. It is asked again when a sentinel announces
//   +switch-master for the name (every sentinel is listened to), when the master's connection
//   fails, and when the master answers READONLY (it was demoted), at most once at a time and
//   no more than every kResolveInterval. A demoted server refuses every write a lock makes, so
//   a stale address can cost a round, never a grant.
// - A failover is a restart as far as safety goes: the promoted replica may lack the newest
//   writes. The node's boot identity (node/server_identity.h) is the master's run_id and
//   replication id, so every client, whether or not it saw the failover happen, keeps the
//   node out of quorums until the largest ttl has passed (lock/membership.h).
// - A grant of a ttl new to the master counts only once the record of the ttl is on every
//   replica Sentinel may promote (SENTINEL REPLICAS, WAIT): the master holds the lock's key and
//   that record alone, and one lossy failover would otherwise lose both (record_grant_after).
// - Waiters' subscriptions move to the new master with it.
//
// Sentinels are asked without AUTH (the user and password of the URL are the master's).
//
// Thread-safety: everything on the io thread (lendable_connection() is null); epoch() and
// address() from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "node/node.h"
#include "node/pending_requests.h"
#include "node/rate_limited.h"
#include "node/replica_confirm.h"
#include "node/server_node.h"

namespace dlock::node {

class SentinelNode final : public Node {
 public:
  static constexpr std::chrono::milliseconds kResolveInterval{100};

  SentinelNode(asio::io_context& io, net::NodeAddress address, net::ConnectionOptions options,
               MessageHandler on_message, std::size_t index, Observer* observer);
  ~SentinelNode() override;

  void run(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
           net::Connection::Callback done) override;
  void subscribe(const std::string& channel, net::Clock::time_point deadline,
                 net::Connection::Callback done) override;
  void unsubscribe(const std::string& channel) override;

  net::Connection* lendable_connection() noexcept override { return nullptr; }
  // The master's (a read of an atomic and a poll under the connection's own lock: any thread).
  bool closed_by_server() override;
  const net::NodeAddress& address() const noexcept override { return address_; }
  std::uint64_t epoch() const noexcept override { return epoch_.load(std::memory_order_acquire); }

 private:
  struct Sentinel {
    std::unique_ptr<net::Connection> asked;     // SENTINEL GET-MASTER-ADDR-BY-NAME
    std::unique_ptr<net::Connection> listened;  // SUBSCRIBE +switch-master
  };

  void send(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
            net::Connection::Callback done);
  // An acquisition: its reply, if a grant (Call::granted) of a ttl that no record confirmed on
  // the replicas still covers, is handed on only once the bare ttl is recorded again on the
  // master (record_call, for twice the ttl) and every replica Sentinel may promote confirmed it
  // (SENTINEL REPLICAS, and INFO replication behind the record for the replicas connected now,
  // then WAIT for them all on the master's connection, within the deadline), on `master`, in
  // the epoch the acquisition was sent in (a reply from another is handed on as it is). The master
  // holds the lock's key and every record of its ttl: a lossy failover would lose them together
  // and the promoted replica's quarantine would last only the ttls it knew (docs/safety.md).
  // A grant that cannot be confirmed fails on this node ("REPLICAS ..."). A renewal round's
  // record (Call::records_itself) goes the same way, its reply taken as the grant; a record
  // confirmed in an earlier epoch still covers it (ReplicatedRecord::covers_in_any_epoch).
  net::Connection::Callback record_grant_after(const Call& call, ServerNode& master,
                                               net::Clock::time_point deadline,
                                               net::Connection::Callback done);
  // SENTINEL REPLICAS, asked of sentinel k and on (the first that answers), while the record is
  // written; and, once all three are in, WAIT or the grant at once.
  void count_replicas(std::size_t k, const Recorded& recorded,
                      const std::shared_ptr<Confirmation>& join);
  void confirm_when_counted(const Recorded& recorded, const std::shared_ptr<Confirmation>& join);
  // INFO: the master's identity (run_id and replication id), as node/server_identity.h says.
  void identify(net::Clock::time_point deadline, net::Connection::Callback done);
  // Runs `go` once a master is known (or fails it by the deadline).
  void when_known(net::Clock::time_point deadline, PendingRequests::Go go);

  // Asks the sentinels where the master is (rate limited; one at a time).
  void resolve();
  void ask_sentinel(std::size_t k, Error last);
  void check_role(ServerNode& candidate, std::size_t k);
  void adopt(ServerNode& master);
  void finish_resolving(const Error* failure);
  void on_sentinel_message(const std::string& payload);
  ServerNode& server_at(const std::string& host, std::uint16_t port);

  asio::io_context& io_;
  const net::NodeAddress address_;
  const net::ConnectionOptions options_;
  const MessageHandler on_message_;
  const std::size_t index_;
  Observer* const observer_;
  const std::string display_;

  std::atomic<std::uint64_t> epoch_{0};
  // master_, for closed_by_server() on any thread (servers_ keeps every ServerNode as long as
  // this node lives).
  std::atomic<ServerNode*> current_master_{nullptr};
  bool closing_ = false;

  std::vector<Sentinel> sentinels_;
  // Every server ever named master, by host:port; never removed while the node lives (a request
  // in flight may point at one).
  std::map<std::string, std::unique_ptr<ServerNode>> servers_;
  ServerNode* master_ = nullptr;

  RateLimited resolver_;     // runs ask_sentinel(0, ...)
  PendingRequests waiting_;  // for a master

  std::set<std::string> channels_;  // subscribed, on master_
  // The last bare record of a ttl confirmed on the master's replicas (record_grant_after), and
  // the WAIT that confirms one.
  RecordConfirmations confirmations_;
};

}  // namespace dlock::node

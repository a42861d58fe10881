// SPDX-License-Identifier: MIT
// ClusterNode: a whole Redis Cluster as one lock node (one vote), named by one of its servers
// (redis-cluster://host:port). Each call goes to the master of its keys' slot:
//
// - The slot map comes from CLUSTER SLOTS, asked of the seed and then of any known master. It
//   is asked again on a MOVED redirection, on a connection failure and on a CLUSTERDOWN, at
//   most once at a time and no more than every kRefreshInterval: a failover or a reshard costs a
//   few refreshes, not one per request.
// - MOVED updates the slot at once and resends there; ASK resends once, preceded by ASKING, to
//   the importing master; TRYAGAIN (a multi-key script while its slot migrates) retries after a
//   short pause until the deadline, except a call that may be split by key (Call::args_per_key,
//   the renew batch), which is sent again one key per call (each follows its own ASK: held
//   locks stay held during a migration). At most
//   kMaxRedirects per request.
// - A script reaches only keys of one slot. Every key of a lock name is in its slot
//   (lock/keys.h); the node keys (Call::node_keys) are named per slot here; a renew batch (the
//   watchdog's, many names) is split per slot, pipelined to each master, and its replies put
//   back in order.
// - The cluster's boot identity (INFO run_id, which lock/membership.h remembers to spot
//   restarts) covers every master that serves slots (node/server_identity.h) and the slots
//   each serves: a master that restarts, a replica promoted in its place (a failover: it may
//   lack the newest writes), or a slot that changes master (it may have come without its keys:
//   CLUSTER SETSLOT ... NODE without MIGRATE, a lost master's slots given to others; a client
//   cannot tell that from a reshard that moved them) changes it, and the whole cluster sits
//   out of quorums as a restarted server would. Each master's config epoch is part of it too,
//   so that a map that comes back to an earlier one is still a new identity.
// - A grant of a ttl new to slot 0's master, when that master serves the lock's slot too,
//   counts only once the record of the ttl is on every replica of it (CLUSTER NODES, WAIT):
//   one lossy failover would otherwise lose the lock's key and that record together
//   (record_grant_after).
// - Waiters listen on shard channels (SSUBSCRIBE) on the master of the channel's slot, and
//   follow the slot when it moves (the server drops the channel: sunsubscribe).
//
// Thread-safety: everything on the io thread (lendable_connection() is null, so NodeSet never
// runs a round on a caller's thread); epoch() and address() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "node/cluster_topology.h"
#include "node/node.h"
#include "node/pending_requests.h"
#include "node/rate_limited.h"
#include "node/replica_confirm.h"
#include "node/server_node.h"
#include "node/slots.h"

namespace dlock::node {

class ClusterNode final : public Node {
 public:
  static constexpr std::chrono::milliseconds kRefreshInterval{100};
  // The slot map is also asked for this often, redirect or not (Redisson's scanInterval): a
  // failover this client sent nothing to is seen within it (a new master changes the epoch and
  // the identity), even if the old master is back in charge by the time the client looks.
  static constexpr std::chrono::milliseconds kScanInterval{1000};
  static constexpr int kMaxRedirects = 5;
  // Where calls that name no key of a lock go (INFO, and hello.lua's node keys): one master,
  // so that the greeting and the run id it reports are of the same server.
  static constexpr std::uint16_t kHomeSlot = 0;

  ClusterNode(asio::io_context& io, net::NodeAddress seed, net::ConnectionOptions options,
              MessageHandler on_message, std::size_t index, Observer* observer);
  ~ClusterNode() override;

  void run(std::shared_ptr<const Call> shared, net::Clock::time_point deadline,
           net::Connection::Callback done) override;
  void subscribe(const std::string& channel, net::Clock::time_point deadline,
                 net::Connection::Callback done) override;
  void unsubscribe(const std::string& channel) override;

  net::Connection* lendable_connection() noexcept override { return nullptr; }
  const net::NodeAddress& address() const noexcept override { return seed_; }
  std::uint64_t epoch() const noexcept override { return epoch_.load(std::memory_order_acquire); }

 private:
  struct Request {
    std::shared_ptr<const Call> call;  // its node keys resolved
    std::uint16_t slot = 0;
    net::Clock::time_point deadline;
    net::Connection::Callback done;
    int redirects = 0;
    bool every_master = false;           // INFO: asked of every master (identify)
    ServerNode** answered_by = nullptr;  // if set, told which server answered last
  };

  // One call to one slot (the renew batch may make several).
  void route(Request request);
  void send_to(ServerNode& shard, Request request, bool asking);
  void on_reply(ServerNode& shard, Request request, Result<resp::Reply> reply);
  // A call with Call::args_per_key (the renew batch) split per slot, or with `per_key` one call
  // per key (its slot migrates).
  void run_split_by_key(const Call& call, net::Clock::time_point deadline,
                        net::Connection::Callback done, bool per_key = false);
  // An acquisition whose ttl the greeting's copy of the live ttls (slot 0's) may not hold for a
  // ttl more: raised there first (the call's record_call, for twice its ttl), then sent.
  void raise_max_ttl_then(const Call& call, Request acquisition);
  // An acquisition of a lock in `slot`: its reply, if a grant (Call::granted), is handed on
  // only once slot 0's record holds the bare ttl for the lease's life (record_call with no
  // announcement, for twice the ttl; skipped while the last one raised covers it). The
  // announcement raised before may be taken back once the client settles (a refused larger
  // ttl): the bare entry is what keeps the lease known where greetings look, as acquire.lua's
  // does on a plain server. A grant that cannot be recorded there fails on this node.
  // When slot 0's master serves `slot` too (slot 0 itself included), one lossy failover of it
  // would lose the lock's key and that record together: there the record also has to be
  // confirmed on every replica of that master (confirm_on_replicas), unless a record confirmed
  // so still covers the lease; a grant that cannot be confirmed fails on this node. A renewal
  // round's record (Call::records_itself, sent to slot 0 itself) goes the same way, its reply
  // taken as the grant: confirmed on slot 0's replicas whatever slots the renewed locks are in.
  void record_grant_after(const Call& call, std::uint16_t slot, Request& acquisition);
  bool home_grant_covers(std::int64_t ttl) const;
  // CLUSTER NODES and INFO replication on slot 0's master, sent right behind the record; and,
  // once all are in, what follows from them (confirm_on_replicas' steps, or the grant at once).
  void count_home_replicas(const Recorded& recorded, const std::shared_ptr<Confirmation>& join);
  void confirm_when_counted(const Recorded& recorded, const std::shared_ptr<Confirmation>& join);
  // CLUSTER NODES and INFO replication on `master`, the server that wrote the record (its
  // replicas by its own table, and those connected to it now), then WAIT for all of them there
  // (replicas_to_wait_for) within the acquisition's deadline: `grant` is handed
  // on only if every one confirmed and no new connection or master came in between; else an
  // error reply "REPLICAS ...".
  void confirm_on_replicas(ServerNode& master, Recorded recorded, resp::Reply grant,
                           net::Connection::Callback done);
  // INFO for the cluster as a whole: asked of every master, answered as one server would, with
  // a run_id that changes whenever any master does (see the header comment).
  void identify(Request request);
  // The slots `master` serves by the current map, as ranges "0-5460,10923-10923".
  std::string slots_served_by(const ServerNode* master) const;
  // One master's part of the identity, "run_id/master_replid@config_epoch:slots" (INFO, then
  // CLUSTER INFO), and its INFO reply (empty if none). A slot given to another master may have
  // left its keys behind (CLUSTER SETSLOT ... NODE without MIGRATE; a lost master's slots
  // assigned to others): which master serves which slots is part of the identity, so that
  // every change is a new boot (see the header).
  void identify_master(ServerNode& master, std::string slots, net::Clock::time_point deadline,
                       std::function<void(Result<std::string>, std::string)> done);

  ServerNode& shard_at(const std::string& host, std::uint16_t port);
  // Asks for the slot map (rate limited; one at a time); requests waiting for it go on then.
  void refresh();
  void ask_for_slot_map();
  void ask_for_slots(std::vector<ServerNode*> candidates, std::size_t k, Error last);
  void apply(const std::vector<SlotRange>& ranges);
  void scan();
  void set_owner(std::uint16_t slot, ServerNode* shard);
  // Runs `request` (or fails it) once the first slot map is known.
  void when_known(Request request);

  void bind(const std::string& channel, net::Clock::time_point deadline,
            net::Connection::Callback done);
  void rebind_moved_channels();

  asio::io_context& io_;
  const net::NodeAddress seed_;
  const net::ConnectionOptions options_;
  const MessageHandler on_message_;
  const std::size_t index_;
  Observer* const observer_;
  const std::string display_;

  std::atomic<std::uint64_t> epoch_{0};
  bool closing_ = false;

  // Every master ever seen, by host:port. Never removed while the node lives (a request or a
  // subscription may still point at one), so a pointer to one stays valid.
  std::map<std::string, std::unique_ptr<ServerNode>> shards_;
  std::array<ServerNode*, kSlotCount> owner_{};  // null: not served (or not known yet)
  bool known_ = false;                           // a slot map arrived once

  RateLimited refresher_;          // runs ask_for_slot_map()
  asio::steady_timer scan_timer_;  // kScanInterval, from the first slot map on

  PendingRequests waiting_;  // for the first slot map

  // The largest ttl known raised on slot 0's record, and the epoch it was raised in (a new
  // epoch may mean a new master there). Io thread only.
  // The last ttl raised in slot 0's dlock:max-ttl, on which connection epoch, and until when
  // that entry lives (raised for twice the ttl: an acquisition needs it for one ttl more).
  std::int64_t home_max_ttl_ = 0;
  std::uint64_t home_max_ttl_epoch_ = 0;
  net::Clock::time_point home_max_ttl_until_{};
  std::string home_max_ttl_announcement_;  // the announcement it was raised under (Call)
  // The last bare ttl a grant raised there (record_grant_after), its epoch, and until when
  // that entry lives at least.
  std::int64_t home_grant_ttl_ = 0;
  std::uint64_t home_grant_epoch_ = 0;
  net::Clock::time_point home_grant_until_{};
  // The last such entry confirmed on every replica of slot 0's master (or raised on a master
  // without any): record_grant_after need not confirm a ttl it covers again; and the WAIT
  // that confirms one.
  RecordConfirmations home_confirmations_;

  std::map<std::string, ServerNode*> channels_;  // subscribed channel -> where (null: moving)
};

}  // namespace dlock::node

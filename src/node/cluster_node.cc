// SPDX-License-Identifier: MIT
#include "node/cluster_node.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

#include "node/node_keys.h"
#include "node/replica_confirm.h"
#include "node/server_identity.h"

namespace dlock::node {
namespace {

constexpr std::chrono::milliseconds kTryAgainPause{20};

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  return out;
}

// The slot a call works on: that of its lock keys (a script's keys other than node keys, a
// command's first argument), or kHomeSlot for a call with none (INFO, hello.lua). nullopt: its
// keys span slots.
std::optional<std::uint16_t> slot_of(const Call& call) {
  if (call.script == nullptr) {
    static const std::set<std::string> kKeyless{"INFO", "PING", "TIME", "CLUSTER", "ECHO"};
    if (call.keys.size() < 2 || kKeyless.count(upper(call.keys[0])) > 0) {
      return ClusterNode::kHomeSlot;
    }
    return key_slot(call.keys[1]);
  }
  std::optional<std::uint16_t> slot;
  for (std::size_t i = 0; i < call.keys.size(); ++i) {
    if (call.is_node_key(i)) continue;
    const auto s = key_slot(call.keys[i]);
    if (slot && *slot != s) return std::nullopt;
    slot = s;
  }
  return slot.value_or(ClusterNode::kHomeSlot);
}

// The call as this cluster runs it in `slot`: node keys named for the slot.
Call in_slot(const Call& call, std::uint16_t slot) {
  Call out = call;
  if (out.script != nullptr) {
    for (std::size_t i = 0; i < out.keys.size(); ++i) {
      if (out.is_node_key(i)) out.keys.replace(i, node_key_in_slot(out.keys[i], slot));
    }
  }
  return out;
}

resp::Reply error_reply(std::string text) {
  resp::Reply r;
  r.type = resp::Reply::Type::error;
  r.str = std::move(text);
  return r;
}

std::string identity_of(const std::string& host, std::uint16_t port) {
  std::string h = host;
  std::transform(h.begin(), h.end(), h.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return h + ":" + std::to_string(port);
}

}  // namespace

ClusterNode::ClusterNode(asio::io_context& io, net::NodeAddress seed,
                         net::ConnectionOptions options, MessageHandler on_message,
                         std::size_t index, Observer* observer)
    : io_(io),
      seed_(std::move(seed)),
      options_(options),
      on_message_(std::move(on_message)),
      index_(index),
      observer_(observer),
      display_(seed_.display()),
      refresher_(io, kRefreshInterval, [this] { ask_for_slot_map(); }),
      scan_timer_(io),
      waiting_(io, "the slot map of " + display_),
      home_confirmations_("slot 0's master",
                          {[this] { return closing_; }, [this] { return epoch(); },
                           [this](const Error& e) {
                             if (e.is(errc::io_error)) refresh();
                           }}) {}

ClusterNode::~ClusterNode() {
  // The io thread has stopped (NodeSet joins it first): no callback runs any more.
  closing_ = true;
  shards_.clear();
}

void ClusterNode::run(std::shared_ptr<const Call> shared, net::Clock::time_point deadline,
                      net::Connection::Callback done) {
  done = observed(observer_, index_, display_, std::move(done));
  const Call& call = *shared;
  if (is_command(call, "INFO")) {
    Request request{std::make_shared<const Call>(call), kHomeSlot, deadline, std::move(done)};
    request.every_master = true;
    return route(std::move(request));
  }
  const auto slot = slot_of(call);
  if (!slot) {
    if (call.args_per_key > 0) return run_split_by_key(call, deadline, std::move(done));
    // Never for dlock's own names (lock/keys.h keeps a name's keys in its slot).
    asio::post(io_, [done = std::move(done)] {
      done(Error(errc::invalid_argument, "the keys of one call span Redis Cluster slots"));
    });
    return;
  }
  Request request{std::make_shared<const Call>(in_slot(call, *slot)), *slot, deadline,
                  std::move(done)};
  if (call.record_ttl && call.record_call != nullptr) {
    // A lock outside the home slot: acquire.lua records its ttl in the lock's slot only. A lock
    // in it: its grant may need the record confirmed on the replicas (record_grant_after).
    if (call.granted != nullptr) record_grant_after(call, *slot, request);
    const std::int64_t ttl = call.record_ttl->count();
    // Raised again under a new announcement too: the one raised before may be taken back. A
    // call that is itself the record needs nothing raised first.
    if (call.records_itself) return route(std::move(request));
    if (ttl > home_max_ttl_ || home_max_ttl_epoch_ != epoch() ||
        net::Clock::now() + std::chrono::milliseconds(ttl) > home_max_ttl_until_ ||
        call.announcement.str() != home_max_ttl_announcement_) {
      return raise_max_ttl_then(call, std::move(request));
    }
  }
  route(std::move(request));
}

void ClusterNode::raise_max_ttl_then(const Call& call, Request acquisition) {
  const std::int64_t ttl = call.record_ttl->count();
  std::string announcement = call.announcement.str();
  const std::uint64_t epoch_then = epoch();
  const auto deadline = acquisition.deadline;
  const auto sent = net::Clock::now();
  const double drift = call.record_drift;
  auto raise = std::make_shared<const Call>(
      in_slot(call.record_call(*call.record_ttl, announcement), kHomeSlot));
  route(Request{std::move(raise), kHomeSlot, deadline,
                [this, ttl, epoch_then, sent, drift, announcement = std::move(announcement),
                 acquisition = std::move(acquisition)](Result<resp::Reply> r) mutable {
                  if (!r || r->is_error()) {
                    // Not recorded where greetings look: this node must not grant it.
                    return acquisition.done(
                        r ? Result<resp::Reply>(
                                Error(errc::script_error, "raising the largest ttl: " + r->str))
                          : std::move(r));
                  }
                  if (epoch_then == epoch()) {
                    home_max_ttl_ = ttl;
                    home_max_ttl_epoch_ = epoch_then;
                    home_max_ttl_until_ = record_lives_until(sent, ttl, drift);
                    home_max_ttl_announcement_ = std::move(announcement);
                  }
                  route(std::move(acquisition));
                }});
}

void ClusterNode::record_grant_after(const Call& call, std::uint16_t slot, Request& acquisition) {
  auto record = std::make_shared<const Call>(
      in_slot(call.record_call(*call.record_ttl, std::string()), kHomeSlot));
  acquisition.done = [this, slot, ttl = call.record_ttl->count(), drift = call.record_drift,
                      granted = call.granted, renewal = call.records_itself,
                      record = std::move(record), deadline = acquisition.deadline,
                      done = std::move(acquisition.done)](Result<resp::Reply> r) mutable {
    if (!r || !granted(*r)) return done(std::move(r));
    // The lock's key and slot 0's record on one master: a lossy failover of it loses both, so
    // the record must be on its replicas (docs/safety.md, "What a failover can still hide").
    const bool shared = owner_[slot] == nullptr || owner_[slot] == owner_[kHomeSlot];
    if (shared ? home_confirmations_.record().covers(ttl, epoch()) : home_grant_covers(ttl)) {
      return done(std::move(r));
    }
    if (shared && home_confirmations_.record().refusing(epoch())) {
      return done(recently_not_confirmed(home_confirmations_.master(), renewal));
    }
    const Recorded recorded{ttl, epoch(), net::Clock::now(), deadline, renewal, drift};
    auto join = std::make_shared<Confirmation>();
    join->grant = std::move(*r);
    join->done = std::move(done);
    join->confirm = shared;
    Request request{std::move(record), kHomeSlot, deadline,
                    [this, recorded, join](Result<resp::Reply> raised) mutable {
                      if (raised && !raised->is_error() && recorded.epoch == epoch()) {
                        home_grant_ttl_ = recorded.ttl;
                        home_grant_epoch_ = recorded.epoch;
                        home_grant_until_ =
                            record_lives_until(recorded.sent, recorded.ttl, recorded.drift);
                      }
                      join->raised = std::move(raised);
                      confirm_when_counted(recorded, join);
                    }};
    // The server that wrote the record (slot 0's master, or where an ASK sent it): the one
    // whose replicas must have it.
    request.answered_by = &join->writer;
    route(std::move(request));
    if (shared) count_home_replicas(recorded, join);
  };
}

void ClusterNode::count_home_replicas(const Recorded& recorded,
                                      const std::shared_ptr<Confirmation>& join) {
  // Every replica slot 0's master has by its own table, also one paused or cut off: Redis
  // Cluster may promote it with what it had. Pipelined right behind the record.
  static const auto kNodes = std::make_shared<const Call>(Call{nullptr, {"CLUSTER", "NODES"}, {}});
  Request count{kNodes, kHomeSlot, recorded.deadline,
                [this, recorded, join](Result<resp::Reply> r) {
                  join->replicas = r && r->type == resp::Reply::Type::string
                                       ? replica_addresses_of_myself(r->str)
                                       : std::nullopt;
                  if (!*join->replicas) join->count_error = r ? r->str : r.error().message();
                  confirm_when_counted(recorded, join);
                }};
  count.answered_by = &join->counted_on;
  route(std::move(count));
  // And the replicas connected to it now: WAIT counts acknowledgements from any of them.
  Request connected{info_replication(), kHomeSlot, recorded.deadline,
                    [this, recorded, join](Result<resp::Reply> r) {
                      join->take_connected(r);
                      confirm_when_counted(recorded, join);
                    }};
  connected.answered_by = &join->connected_on;
  route(std::move(connected));
}

void ClusterNode::confirm_when_counted(const Recorded& recorded,
                                       const std::shared_ptr<Confirmation>& join) {
  if (!join->complete()) return;
  // Granted, but not recorded where greetings look: the grant must not count (a failed attempt
  // releases it; a lease of other nodes does not need it).
  if (auto failed = join->not_recorded()) return join->done(std::move(*failed));
  if (!join->confirm) return join->done(std::move(join->grant));
  if (!*join->replicas) {
    return join->done(
        refusal("REPLICAS cannot count the replicas of slot 0's master (CLUSTER "
                "NODES: " +
                join->count_error + ")"));
  }
  if (!*join->connected) {
    return join->done(connected_not_listed("slot 0's master", join->connected_error));
  }
  if (join->counted_on != join->writer || join->connected_on != join->writer) {
    // The record was redirected (ASK): count the replicas of the server that wrote it.
    return confirm_on_replicas(*join->writer, recorded, std::move(join->grant),
                               std::move(join->done));
  }
  const std::size_t replicas = join->to_wait_for();
  if (replicas == 0) {
    return home_confirmations_.confirmed(recorded, std::move(join->grant), join->done);
  }
  home_confirmations_.wait_for_replicas(*join->writer, recorded, replicas, std::move(join->grant),
                                        std::move(join->done));
}

bool ClusterNode::home_grant_covers(std::int64_t ttl) const {
  // The bare entry raised last lives until home_grant_until_ at least (record_lives_until); a
  // lease granted by now ends within `ttl` from now.
  return ttl <= home_grant_ttl_ && home_grant_epoch_ == epoch() &&
         net::Clock::now() + std::chrono::milliseconds(ttl) <= home_grant_until_;
}

void ClusterNode::confirm_on_replicas(ServerNode& master, Recorded recorded, resp::Reply grant,
                                      net::Connection::Callback done) {
  // Every replica the master has by its own table, also one paused or cut off: Redis Cluster
  // may promote it with what it had; and those connected to it now. Both asked of the master
  // itself, so confirm_when_counted goes on to WAIT there (the record is in already).
  static const auto kNodes = std::make_shared<const Call>(Call{nullptr, {"CLUSTER", "NODES"}, {}});
  auto join = std::make_shared<Confirmation>();
  join->raised.emplace(resp::Reply{});
  join->grant = std::move(grant);
  join->done = std::move(done);
  join->writer = join->counted_on = join->connected_on = &master;
  master.run(kNodes, recorded.deadline, [this, recorded, join](Result<resp::Reply> r) {
    if (closing_) return;
    if (!r && r.error().is(errc::io_error)) refresh();
    join->replicas = r && r->type == resp::Reply::Type::string ? replica_addresses_of_myself(r->str)
                                                               : std::nullopt;
    if (!*join->replicas) join->count_error = r ? r->str : r.error().message();
    confirm_when_counted(recorded, join);
  });
  master.run(info_replication(), recorded.deadline, [this, recorded, join](Result<resp::Reply> r) {
    if (closing_) return;
    join->take_connected(r);
    confirm_when_counted(recorded, join);
  });
}

void ClusterNode::run_split_by_key(const Call& call, net::Clock::time_point deadline,
                                   net::Connection::Callback done, bool per_key) {
  // KEYS[i] with its call.args_per_key arguments. One call per slot (per key: one per key,
  // each following its own ASK); the replies go back in order.
  std::map<std::size_t, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < call.keys.size(); ++i) {
    groups[per_key ? i : key_slot(call.keys[i])].push_back(i);
  }
  struct Merge {
    resp::Reply reply;
    std::size_t left = 0;
    std::optional<Error> all_failed;  // every group failed: the node failed
    bool any_answered = false;
    net::Connection::Callback done;
  };
  auto merge = std::make_shared<Merge>();
  merge->reply.type = resp::Reply::Type::array;
  merge->reply.elements.assign(call.keys.size(), error_reply("ERR no answer"));
  merge->left = groups.size();
  merge->done = std::move(done);
  for (auto& [group, indexes] : groups) {
    const std::uint16_t slot = key_slot(call.keys[indexes.front()]);
    Call part{call.script, {}, {}};
    part.args_per_key = call.args_per_key;
    const std::size_t n = call.args_per_key;
    for (std::size_t i : indexes) {
      part.keys.push_back(call.keys[i]);
      for (std::size_t a = n * i; a < n * i + n; ++a) part.args.push_back(call.args[a]);
    }
    route(Request{std::make_shared<const Call>(std::move(part)), slot, deadline,
                  [merge, indexes = indexes](Result<resp::Reply> r) {
                    if (r && r->is_array() && r->elements.size() == indexes.size()) {
                      merge->any_answered = true;
                      for (std::size_t k = 0; k < indexes.size(); ++k) {
                        merge->reply.elements[indexes[k]] = std::move(r->elements[k]);
                      }
                    } else {
                      const std::string why = r ? r->str : r.error().message();
                      for (std::size_t i : indexes) merge->reply.elements[i] = error_reply(why);
                      if (!r && !merge->all_failed) merge->all_failed = r.error();
                    }
                    if (--merge->left > 0) return;
                    if (!merge->any_answered && merge->all_failed) {
                      return merge->done(std::move(*merge->all_failed));
                    }
                    merge->done(std::move(merge->reply));
                  }});
  }
}

void ClusterNode::route(Request request) {
  if (closing_) return;
  if (!known_) return when_known(std::move(request));
  if (request.every_master) return identify(std::move(request));
  ServerNode* shard = owner_[request.slot];
  if (shard == nullptr) {
    refresh();
    asio::post(io_, [done = std::move(request.done), slot = request.slot] {
      done(Error(errc::io_error, "slot " + std::to_string(slot) +
                                     " has no master (the cluster is down or being resharded)"));
    });
    return;
  }
  send_to(*shard, std::move(request), false);
}

void ClusterNode::send_to(ServerNode& shard, Request request, bool asking) {
  auto call = request.call;
  const auto deadline = request.deadline;
  auto then = [this, shard = &shard, request = std::move(request)](Result<resp::Reply> r) mutable {
    on_reply(*shard, std::move(request), std::move(r));
  };
  if (asking) {
    shard.run_asking(std::move(call), deadline, std::move(then));
  } else {
    shard.run(std::move(call), deadline, std::move(then));
  }
}

void ClusterNode::on_reply(ServerNode& shard, Request request, Result<resp::Reply> reply) {
  if (closing_) return;
  if (request.answered_by != nullptr) *request.answered_by = &shard;
  if (!reply) {
    // The master may be gone: a failover gives its slots to a replica.
    if (reply.error().is(errc::io_error)) refresh();
    return request.done(std::move(reply));
  }
  if (auto redirect = parse_redirect(*reply)) {
    if (++request.redirects > kMaxRedirects) {
      return request.done(Error(
          errc::io_error,
          "slot " + std::to_string(request.slot) + ": too many redirections (" + reply->str + ")"));
    }
    ServerNode& target =
        shard_at(redirect->host.empty() ? shard.address().host : redirect->host, redirect->port);
    if (!redirect->ask) {
      set_owner(redirect->slot, &target);
      rebind_moved_channels();
      refresh();
    }
    return send_to(target, std::move(request), redirect->ask);
  }
  if (reply->is_error_code("TRYAGAIN")) {
    // A script's keys are split between the two masters of a migrating slot. A renewal of
    // several keys (permits of one semaphore, names sharing a hash tag) cannot wait for the
    // migration to end, or its leases run out meanwhile: it goes key by key, each key to the
    // master that has it (ASK). Anything else waits for the migration to move the rest.
    const Call& call = *request.call;
    if (call.args_per_key > 0 && call.keys.size() > 1) {
      return run_split_by_key(call, request.deadline, std::move(request.done), true);
    }
    const auto again = net::Clock::now() + kTryAgainPause;
    if (again >= request.deadline) return request.done(std::move(reply));
    auto timer = std::make_shared<asio::steady_timer>(io_, again);
    timer->async_wait([this, timer, request = std::move(request)](const asio::error_code& ec) {
      if (!ec) route(request);
    });
    return;
  }
  if (reply->is_error_code("CLUSTERDOWN")) refresh();
  request.done(std::move(reply));
}

std::string ClusterNode::slots_served_by(const ServerNode* master) const {
  std::string ranges;
  for (std::uint32_t first = 0; first < kSlotCount;) {
    std::uint32_t last = first;
    while (last + 1 < kSlotCount && owner_[last + 1] == owner_[first]) ++last;
    if (owner_[first] == master) {
      ranges += (ranges.empty() ? "" : ",") + std::to_string(first) + "-" + std::to_string(last);
    }
    first = last + 1;
  }
  return ranges;
}

void ClusterNode::identify(Request request) {
  std::vector<ServerNode*> masters;
  for (std::uint32_t s = 0; s < kSlotCount; ++s) {
    if (owner_[s] == nullptr) {
      // Part of the cluster is not served: which servers make it up is not known.
      refresh();
      asio::post(io_, [done = std::move(request.done), s] {
        done(Error(errc::io_error, "slot " + std::to_string(s) + " has no master"));
      });
      return;
    }
    if (std::find(masters.begin(), masters.end(), owner_[s]) == masters.end()) {
      masters.push_back(owner_[s]);
    }
  }
  struct Gather {
    std::vector<std::string> parts;
    std::vector<std::string> infos;
    std::size_t left = 0;
    std::optional<Error> failure;
    net::Connection::Callback done;
  };
  auto gather = std::make_shared<Gather>();
  gather->left = masters.size();
  gather->done = std::move(request.done);
  for (ServerNode* master : masters) {
    identify_master(*master, slots_served_by(master), request.deadline,
                    [gather](Result<std::string> part, std::string info) {
                      if (!part && !gather->failure) gather->failure = part.error();
                      gather->parts.push_back(part ? std::move(*part) : std::string());
                      if (!info.empty()) gather->infos.push_back(std::move(info));
                      if (--gather->left > 0) return;
                      if (gather->failure) return gather->done(std::move(*gather->failure));
                      gather->done(identity_reply(std::move(gather->parts), gather->infos));
                    });
  }
}

void ClusterNode::identify_master(ServerNode& master, std::string slots,
                                  net::Clock::time_point deadline,
                                  std::function<void(Result<std::string>, std::string)> done) {
  static const auto kInfo = std::make_shared<const Call>(Call{nullptr, {"INFO"}, {}});
  static const auto kClusterInfo =
      std::make_shared<const Call>(Call{nullptr, {"CLUSTER", "INFO"}, {}});
  const std::string where = master.address().display() + ": ";
  master.run(
      kInfo, deadline,
      [this, &master, where, slots = std::move(slots), deadline,
       done = std::move(done)](Result<resp::Reply> r) mutable {
        if (!r && r.error().is(errc::io_error)) refresh();
        std::string info = r && r->type == resp::Reply::Type::string ? std::move(r->str) : "";
        std::string part = master_identity(info);
        if (part.empty()) {
          return done(r ? Error(errc::protocol_error, where + "INFO names no master identity")
                        : Error(r.error().code(), where + r.error().summary()),
                      std::move(info));
        }
        // The master's config epoch: every claim of a slot by a master that does not hold the
        // cluster's largest epoch raises it (and a failover does), so a slot map that comes back
        // to an earlier one (a slot moved away and given back without its keys) is still new.
        master.run(kClusterInfo, deadline,
                   [this, where, part = std::move(part), slots = std::move(slots),
                    info = std::move(info), done = std::move(done)](Result<resp::Reply> c) mutable {
                     if (!c && c.error().is(errc::io_error)) refresh();
                     const std::string epoch = c && c->type == resp::Reply::Type::string
                                                   ? info_field(c->str, "cluster_my_epoch")
                                                   : "";
                     if (epoch.empty()) {
                       return done(
                           c ? Error(errc::protocol_error, where + "CLUSTER INFO names no epoch")
                             : Error(c.error().code(), where + c.error().summary()),
                           std::move(info));
                     }
                     done(part + "@" + epoch + ":" + slots, std::move(info));
                   });
      });
}

ServerNode& ClusterNode::shard_at(const std::string& host, std::uint16_t port) {
  const std::string id = identity_of(host, port);
  auto& shard = shards_[id];
  if (!shard) {
    Sharding sharding;
    sharding.sharded_pubsub = true;
    sharding.group_commit = false;
    sharding.on_dropped = [this, id](const std::string& channel) {
      // The slot moved away: find where it went, and listen there (rebind_moved_channels).
      auto it = channels_.find(channel);
      if (it == channels_.end() || it->second != shards_[id].get()) return;
      it->second = nullptr;
      refresh();
    };
    sharding.on_reconnect = [this, id] {
      // A new connection to a master we used may reach a new process. The first one is not
      // news: nothing was counted from this master before it.
      if (shards_[id]->epoch() > 1) epoch_.fetch_add(1, std::memory_order_acq_rel);
    };
    shard = std::make_unique<ServerNode>(io_, seed_.server_at(host, port), options_, on_message_,
                                         index_, nullptr, std::move(sharding));
  }
  return *shard;
}

void ClusterNode::refresh() {
  if (!closing_) refresher_.request();
}

void ClusterNode::ask_for_slot_map() {
  // Masters that serve slots first (they know the latest map), then the seed, then the rest.
  std::vector<ServerNode*> candidates;
  auto add = [&candidates](ServerNode* n) {
    if (n != nullptr && std::find(candidates.begin(), candidates.end(), n) == candidates.end()) {
      candidates.push_back(n);
    }
  };
  for (auto* owner : owner_) add(owner);
  add(&shard_at(seed_.host, seed_.port));
  for (auto& [id, shard] : shards_) add(shard.get());
  ask_for_slots(std::move(candidates), 0, Error(errc::io_error, "no server to ask"));
}

void ClusterNode::ask_for_slots(std::vector<ServerNode*> candidates, std::size_t k, Error last) {
  if (k == candidates.size()) {
    refresher_.finished();
    return waiting_.release(&last);
  }
  static const auto kSlots = std::make_shared<const Call>(Call{nullptr, {"CLUSTER", "SLOTS"}, {}});
  ServerNode* asked = candidates[k];
  asked->run(kSlots, net::Clock::now() + options_.connect_timeout,
             [this, candidates = std::move(candidates), k, asked](Result<resp::Reply> r) mutable {
               if (closing_) return;
               auto ranges = r ? parse_cluster_slots(*r, asked->address().host)
                               : Result<std::vector<SlotRange>>(r.error());
               if (ranges && ranges->empty()) {
                 ranges = Error(errc::io_error, "no slot is assigned to any master");
               }
               if (!ranges) {
                 const Error& e = ranges.error();
                 return ask_for_slots(
                     std::move(candidates), k + 1,
                     Error(e.code(), asked->address().display() + ": " + e.summary()));
               }
               refresher_.finished();
               apply(*ranges);
               waiting_.release(nullptr);
             });
}

void ClusterNode::apply(const std::vector<SlotRange>& ranges) {
  std::array<ServerNode*, kSlotCount> next{};
  for (const auto& range : ranges) {
    ServerNode* shard = &shard_at(range.host, range.port);
    for (std::uint32_t s = range.first; s <= range.last; ++s) next[s] = shard;
  }
  bool moved = false;
  for (std::uint32_t s = 0; s < kSlotCount; ++s) {
    if (owner_[s] != next[s]) {
      moved = moved || owner_[s] != nullptr;
      owner_[s] = next[s];
    }
  }
  if (!known_) scan();
  known_ = true;
  if (moved) epoch_.fetch_add(1, std::memory_order_acq_rel);
  rebind_moved_channels();
}

void ClusterNode::scan() {
  scan_timer_.expires_after(kScanInterval);
  scan_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec || closing_) return;
    refresh();
    scan();
  });
}

void ClusterNode::set_owner(std::uint16_t slot, ServerNode* shard) {
  if (owner_[slot] == shard) return;
  if (owner_[slot] != nullptr) epoch_.fetch_add(1, std::memory_order_acq_rel);
  owner_[slot] = shard;
}

void ClusterNode::when_known(Request request) {
  const auto deadline = request.deadline;
  waiting_.add(deadline, [this, request = std::move(request)](const Error* failure) mutable {
    if (failure == nullptr) return route(std::move(request));
    request.done(Error(failure->code(),
                       "cannot learn the slots of " + display_ + ": " + failure->summary()));
  });
  refresh();
}

void ClusterNode::subscribe(const std::string& channel, net::Clock::time_point deadline,
                            net::Connection::Callback done) {
  if (!known_) {
    channels_[channel] = nullptr;
    waiting_.add(deadline,
                 [this, channel, deadline, done = std::move(done)](const Error* failure) mutable {
                   if (channels_.count(channel) == 0) return;  // unsubscribed meanwhile
                   if (failure == nullptr) return bind(channel, deadline, std::move(done));
                   if (done) done(*failure);
                 });
    refresh();
    return;
  }
  bind(channel, deadline, std::move(done));
}

void ClusterNode::unsubscribe(const std::string& channel) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  if (it->second != nullptr) it->second->unsubscribe(channel);
  channels_.erase(it);
}

void ClusterNode::bind(const std::string& channel, net::Clock::time_point deadline,
                       net::Connection::Callback done) {
  ServerNode* shard = owner_[key_slot(channel)];
  channels_[channel] = shard;
  if (shard == nullptr) {
    refresh();
    if (done) {
      asio::post(io_, [done = std::move(done)] {
        done(Error(errc::io_error, "the channel's slot has no master"));
      });
    }
    return;
  }
  shard->subscribe(
      channel, deadline,
      [this, shard, channel, deadline, done = std::move(done)](Result<resp::Reply> r) mutable {
        if (closing_) return;
        const auto redirect = r ? parse_redirect(*r) : std::nullopt;
        if (!redirect) {
          if (done) done(std::move(r));
          return;
        }
        // Our map was stale: SSUBSCRIBE there was refused.
        shard->unsubscribe(channel);
        auto it = channels_.find(channel);
        if (it == channels_.end() || it->second != shard) {
          if (done) done(std::move(r));
          return;
        }
        it->second = nullptr;  // bound nowhere: the next map binds it (rebind_moved_channels)
        set_owner(redirect->slot,
                  &shard_at(redirect->host.empty() ? shard->address().host : redirect->host,
                            redirect->port));
        refresh();
        if (net::Clock::now() >= deadline) {
          if (done) done(std::move(r));
          return;
        }
        bind(channel, deadline, std::move(done));
      });
}

void ClusterNode::rebind_moved_channels() {
  std::vector<std::string> moved;
  for (auto& [channel, shard] : channels_) {
    ServerNode* owner = owner_[key_slot(channel)];
    if (owner == shard) continue;
    if (shard != nullptr) shard->unsubscribe(channel);
    shard = nullptr;
    if (owner != nullptr) moved.push_back(channel);
  }
  for (const auto& channel : moved) {
    bind(channel, net::Clock::now() + options_.connect_timeout, {});
  }
}

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
#include "node/sentinel_node.h"

#include <charconv>
#include <optional>

#include "node/replica_confirm.h"
#include "node/server_identity.h"
#include "resp/encode.h"

namespace dlock::node {
namespace {

constexpr std::string_view kSwitchMaster = "+switch-master";

std::string where(const std::string& host, std::uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

std::shared_ptr<const Call> plain(std::vector<std::string> command) {
  return std::make_shared<const Call>(Call{nullptr, std::move(command), {}});
}

// The replicas a SENTINEL REPLICAS reply names that Sentinel may promote, as "ip:port": every
// one not flagged subjectively or objectively down (Sentinel never picks such a replica; one
// that comes back is picked only once it answers again). Such a replica may still be connected
// to the master and acknowledge: the master's own list of connected replicas goes into WAIT's
// count too (replicas_to_wait_for). nullopt: not such a reply.
Confirmation::Addresses promotable_replicas(const resp::Reply& reply) {
  if (!reply.is_array()) return std::nullopt;
  std::vector<std::string> addresses;
  for (const auto& replica : reply.elements) {
    if (!replica.is_array()) return std::nullopt;
    std::string flags, ip, port;
    for (std::size_t i = 0; i + 1 < replica.elements.size(); i += 2) {
      const std::string& field = replica.elements[i].str;
      const std::string& value = replica.elements[i + 1].str;
      if (field == "flags") flags = "," + value + ",";
      if (field == "ip") ip = value;
      if (field == "port") port = value;
    }
    if (flags.find(",s_down,") == std::string::npos &&
        flags.find(",o_down,") == std::string::npos) {
      addresses.push_back(ip + ":" + port);
    }
  }
  return addresses;
}

}  // namespace

SentinelNode::SentinelNode(asio::io_context& io, net::NodeAddress address,
                           net::ConnectionOptions options, MessageHandler on_message,
                           std::size_t index, Observer* observer)
    : io_(io),
      address_(std::move(address)),
      options_(options),
      on_message_(std::move(on_message)),
      index_(index),
      observer_(observer),
      display_(address_.display()),
      resolver_(io, kResolveInterval,
                [this] { ask_sentinel(0, Error(errc::io_error, "no sentinel to ask")); }),
      waiting_(io, "the master '" + address_.master_name + "' of " + display_),
      confirmations_("the master", {[this] { return closing_; }, [this] { return epoch(); },
                                    // A master gone is seen by the send that follows.
                                    [](const Error&) {}}) {
  for (const auto& [host, port] : address_.sentinels) {
    net::NodeAddress sentinel;
    sentinel.host = host;
    sentinel.port = port;
    Sentinel s{std::make_unique<net::Connection>(io, sentinel, options),
               std::make_unique<net::Connection>(io, sentinel, options)};
    net::Connection* listened = s.listened.get();
    listened->set_push_handlers(
        [this](const resp::Reply& push) {
          if (push.elements[1].str == kSwitchMaster) on_sentinel_message(push.elements[2].str);
        },
        [listened] {
          // Every (re)connection: a failover announced while we were away is caught by the
          // failing requests instead.
          listened->send(resp::encode_command({"SUBSCRIBE", kSwitchMaster}),
                         net::Clock::now() + std::chrono::seconds(5), [](Result<resp::Reply>) {});
        });
    sentinels_.push_back(std::move(s));
  }
  asio::post(io_, [this] {
    for (auto& s : sentinels_) s.listened->set_keep_connected(true);
  });
}

SentinelNode::~SentinelNode() {
  // The io thread has stopped (NodeSet joins it first): no callback runs any more.
  closing_ = true;
  sentinels_.clear();
  servers_.clear();
}

void SentinelNode::run(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                       net::Connection::Callback done) {
  done = observed(observer_, index_, display_, std::move(done));
  if (is_command(*call, "INFO")) return identify(deadline, std::move(done));
  send(std::move(call), deadline, std::move(done));
}

void SentinelNode::send(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                        net::Connection::Callback done) {
  if (closing_) return;
  if (master_ == nullptr) {
    return when_known(deadline, [this, call = std::move(call), deadline,
                                 done = std::move(done)](const Error* failure) mutable {
      if (failure != nullptr) return done(*failure);
      send(std::move(call), deadline, std::move(done));
    });
  }
  if (call->record_ttl && call->record_call != nullptr && call->granted != nullptr) {
    done = record_grant_after(*call, *master_, deadline, std::move(done));
  }
  master_->run(std::move(call), deadline, [this, done = std::move(done)](Result<resp::Reply> r) {
    if (closing_) return;
    // A master gone, stalled or demoted: ask the sentinels where it is now.
    if (!r ? r.error().is(errc::io_error) || r.error().is(errc::timeout)
           : r->is_error_code("READONLY") || r->is_error_code("MASTERDOWN")) {
      resolve();
    }
    done(std::move(r));
  });
}

net::Connection::Callback SentinelNode::record_grant_after(const Call& call, ServerNode& master,
                                                           net::Clock::time_point deadline,
                                                           net::Connection::Callback done) {
  auto record = std::make_shared<const Call>(call.record_call(*call.record_ttl, std::string()));
  // The master and epoch the acquisition goes to, captured now: the record and WAIT go to that
  // master, so what they confirm (or the refusal after a failed WAIT) belongs to this epoch.
  return [this, &master, sent_epoch = epoch(), ttl = call.record_ttl->count(),
          drift = call.record_drift, granted = call.granted, renewal = call.records_itself,
          record = std::move(record), deadline,
          done = std::move(done)](Result<resp::Reply> r) mutable {
    if (closing_) return;
    // Another master or connection since the acquisition was sent (a failover, a restart in
    // place): its reply is from an epoch the lock no longer counts, so it is passed on as it
    // is, without a record or a cache entry; filing a confirmation on that master under the
    // new master's epoch would skip the new master's own (docs/safety.md).
    if (master_ != &master || epoch() != sent_epoch) return done(std::move(r));
    // The lock's key and every record of its ttl are on the master alone: a lossy failover
    // loses them together unless the record is on the replicas (docs/safety.md).
    if (!r || !granted(*r)) return done(std::move(r));
    if (renewal ? confirmations_.record().covers_in_any_epoch(ttl)
                : confirmations_.record().covers(ttl, sent_epoch)) {
      return done(std::move(r));
    }
    if (confirmations_.record().refusing(sent_epoch)) {
      return done(recently_not_confirmed(confirmations_.master(), renewal));
    }
    const Recorded recorded{ttl, sent_epoch, net::Clock::now(), deadline, renewal, drift};
    auto join = std::make_shared<Confirmation>();
    join->grant = std::move(*r);
    join->done = std::move(done);
    join->writer = &master;
    // The record (on the master) and the count (from a sentinel) at once.
    master.run(record, deadline, [this, recorded, join](Result<resp::Reply> raised) {
      if (closing_) return;
      join->raised = std::move(raised);
      confirm_when_counted(recorded, join);
    });
    // Right behind the record, on its connection: the replicas connected to the master now.
    master.run(info_replication(), deadline, [this, recorded, join](Result<resp::Reply> info) {
      if (closing_) return;
      join->take_connected(info);
      confirm_when_counted(recorded, join);
    });
    count_replicas(0, recorded, join);
  };
}

void SentinelNode::count_replicas(std::size_t k, const Recorded& recorded,
                                  const std::shared_ptr<Confirmation>& join) {
  if (k == sentinels_.size()) {
    join->replicas.emplace(std::nullopt);
    return confirm_when_counted(recorded, join);
  }
  sentinels_[k].asked->send(resp::encode_command({"SENTINEL", "REPLICAS", address_.master_name}),
                            recorded.deadline, [this, k, recorded, join](Result<resp::Reply> r) {
                              if (closing_) return;
                              const auto replicas = r ? promotable_replicas(*r) : std::nullopt;
                              if (!replicas) {
                                join->count_error += (join->count_error.empty() ? "" : "; ") +
                                                     (r ? r->str : r.error().message());
                                return count_replicas(k + 1, recorded, join);
                              }
                              join->replicas.emplace(*replicas);
                              confirm_when_counted(recorded, join);
                            });
}

void SentinelNode::confirm_when_counted(const Recorded& recorded,
                                        const std::shared_ptr<Confirmation>& join) {
  if (!join->complete()) return;
  // Granted, but its ttl not recorded again: the grant does not count (the failed attempt
  // releases it).
  if (auto failed = join->not_recorded()) return join->done(std::move(*failed));
  if (!*join->replicas) {
    return join->done(
        refusal("REPLICAS cannot count the replicas of the master: no sentinel "
                "answered SENTINEL REPLICAS " +
                address_.master_name + " (" + join->count_error + ")"));
  }
  if (!*join->connected) {
    return join->done(connected_not_listed("the master", join->connected_error));
  }
  const std::size_t replicas = join->to_wait_for();
  if (replicas == 0) {
    return confirmations_.confirmed(recorded, std::move(join->grant), join->done);
  }
  confirmations_.wait_for_replicas(*join->writer, recorded, replicas, std::move(join->grant),
                                   std::move(join->done));
}

void SentinelNode::identify(net::Clock::time_point deadline, net::Connection::Callback done) {
  if (master_ == nullptr) {
    return when_known(deadline, [this, deadline, done = std::move(done)](const Error* failure) {
      if (failure != nullptr) return done(*failure);
      identify(deadline, done);
    });
  }
  static const auto kInfo = plain({"INFO"});
  ServerNode* master = master_;
  master->run(kInfo, deadline, [this, master, done = std::move(done)](Result<resp::Reply> r) {
    if (closing_) return;
    if (!r) {
      if (r.error().is(errc::io_error) || r.error().is(errc::timeout)) resolve();
      return done(std::move(r));
    }
    std::string part = r->type == resp::Reply::Type::string ? master_identity(r->str) : "";
    if (part.empty()) {
      resolve();
      return done(Error(errc::io_error, master->address().display() +
                                            " is no master now (INFO): asking the sentinels"));
    }
    done(identity_reply({std::move(part)}, {r->str}));
  });
}

void SentinelNode::when_known(net::Clock::time_point deadline, PendingRequests::Go go) {
  waiting_.add(deadline, std::move(go));
  resolve();
}

void SentinelNode::resolve() {
  if (!closing_) resolver_.request();
}

void SentinelNode::ask_sentinel(std::size_t k, Error last) {
  if (k == sentinels_.size()) return finish_resolving(&last);
  const auto& [host, port] = address_.sentinels[k];
  const std::string sentinel = "sentinel " + where(host, port);
  sentinels_[k].asked->send(
      resp::encode_command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", address_.master_name}),
      net::Clock::now() + options_.connect_timeout, [this, k, sentinel](Result<resp::Reply> r) {
        if (closing_) return;
        if (!r)
          return ask_sentinel(k + 1,
                              Error(r.error().code(), sentinel + ": " + r.error().summary()));
        if (r->is_error())
          return ask_sentinel(k + 1, Error(errc::invalid_argument, sentinel + ": " + r->str));
        std::uint16_t master_port = 0;
        if (r->is_array() && r->elements.size() == 2) {
          const std::string& p = r->elements[1].str;
          std::from_chars(p.data(), p.data() + p.size(), master_port);
        }
        if (master_port == 0 || r->elements[0].str.empty()) {
          return ask_sentinel(
              k + 1, Error(errc::invalid_argument,
                           sentinel + " knows no master named '" + address_.master_name + "'"));
        }
        check_role(server_at(r->elements[0].str, master_port), k);
      });
}

void SentinelNode::check_role(ServerNode& candidate, std::size_t k) {
  static const auto kRole = plain({"ROLE"});
  candidate.run(
      kRole, net::Clock::now() + options_.connect_timeout,
      [this, &candidate, k](Result<resp::Reply> r) {
        if (closing_) return;
        const std::string who = candidate.address().display();
        if (!r)
          return ask_sentinel(k + 1, Error(r.error().code(), who + ": " + r.error().summary()));
        if (r->is_error()) {
          // WRONGPASS, NOAUTH: the master's own answer, said as it is.
          return ask_sentinel(k + 1, Error(errc::auth_error, who + ": " + r->str));
        }
        if (!r->is_array() || r->elements.empty() || r->elements[0].str != "master") {
          return ask_sentinel(k + 1, Error(errc::io_error, who + " is not a master (yet)"));
        }
        adopt(candidate);
        finish_resolving(nullptr);
      });
}

void SentinelNode::adopt(ServerNode& master) {
  if (master_ == &master) return;
  ServerNode* old = master_;
  master_ = &master;
  current_master_.store(&master, std::memory_order_release);
  // Replies from here on may come from another server: votes counted before do not carry over.
  if (old != nullptr) epoch_.fetch_add(1, std::memory_order_acq_rel);
  for (const auto& channel : channels_) {
    if (old != nullptr) old->unsubscribe(channel);
    master.subscribe(channel, net::Clock::now() + options_.connect_timeout,
                     [](Result<resp::Reply>) {});
  }
}

bool SentinelNode::closed_by_server() {
  ServerNode* master = current_master_.load(std::memory_order_acquire);
  return master != nullptr && master->closed_by_server();
}

void SentinelNode::finish_resolving(const Error* failure) {
  resolver_.finished();
  // With a master known nothing waits; without one, fail what waits with the reason at once
  // (a wrong name or password is not worth waiting out).
  waiting_.release(master_ != nullptr ? nullptr : failure);
}

void SentinelNode::on_sentinel_message(const std::string& payload) {
  // "<master name> <old ip> <old port> <new ip> <new port>"
  if (payload.size() > address_.master_name.size() &&
      payload.compare(0, address_.master_name.size(), address_.master_name) == 0 &&
      payload[address_.master_name.size()] == ' ') {
    resolve();
  }
}

ServerNode& SentinelNode::server_at(const std::string& host, std::uint16_t port) {
  const std::string id = where(host, port);
  auto& server = servers_[id];
  if (!server) {
    Sharding hooks;
    hooks.on_reconnect = [this, id] {
      // A new connection to the master may reach a new process (restarted in place).
      ServerNode* s = servers_[id].get();
      if (s == master_ && s->epoch() > 1) epoch_.fetch_add(1, std::memory_order_acq_rel);
    };
    server = std::make_unique<ServerNode>(io_, address_.server_at(host, port), options_,
                                          on_message_, index_, nullptr, std::move(hooks));
  }
  return *server;
}

void SentinelNode::subscribe(const std::string& channel, net::Clock::time_point deadline,
                             net::Connection::Callback done) {
  channels_.insert(channel);
  if (master_ != nullptr) return master_->subscribe(channel, deadline, std::move(done));
  when_known(deadline, [this, channel, deadline, done = std::move(done)](const Error* failure) {
    if (channels_.count(channel) == 0) return;  // unsubscribed meanwhile
    if (failure != nullptr) {
      if (done) done(*failure);
      return;
    }
    master_->subscribe(channel, deadline, done);
  });
}

void SentinelNode::unsubscribe(const std::string& channel) {
  if (channels_.erase(channel) == 0) return;
  if (master_ != nullptr) master_->unsubscribe(channel);
}

}  // namespace dlock::node

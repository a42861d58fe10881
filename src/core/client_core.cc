// SPDX-License-Identifier: MIT
// ClientCore's construction: the options checked, the node URLs parsed, the TLS context made,
// and the core's own checks of a name and ttl. Beside its class (client_core.h), so the public
// Client (api/client.cc) only asks for one.
#include "core/client_core.h"

#include <set>

#include "engine/background_thread.h"
#include "engine/thread_role.h"
#include "lock/keys.h"
#include "net/node_address.h"

namespace dlock::detail {
namespace {

std::string ms(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

Result<std::unique_ptr<asio::ssl::context>> make_tls_context(const TlsOptions& tls) {
  try {
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                     asio::ssl::context::no_tlsv1_1);
    if (tls.ca_file.empty()) {
      ctx->set_default_verify_paths();
    } else {
      ctx->load_verify_file(tls.ca_file);
    }
    if (!tls.cert_file.empty()) ctx->use_certificate_chain_file(tls.cert_file);
    if (!tls.key_file.empty()) ctx->use_private_key_file(tls.key_file, asio::ssl::context::pem);
    ctx->set_verify_mode(tls.verify_peer ? asio::ssl::verify_peer : asio::ssl::verify_none);
    return ctx;
  } catch (const std::system_error& e) {
    return Error(errc::invalid_argument, std::string("TLS setup failed: ") + e.what());
  }
}

}  // namespace

Result<std::shared_ptr<ClientCore>> ClientCore::create(const ClientOptions& options) {
  if (options.nodes.empty()) return Error(errc::invalid_argument, "no Redis nodes given");
  for (const auto& [d, what] : {std::pair{options.node_timeout, "node_timeout"},
                                {options.connect_timeout, "connect_timeout"},
                                {options.reconnect_backoff_max, "reconnect_backoff_max"}}) {
    if (d > kMaxTimeout) {
      return Error(errc::invalid_argument,
                   std::string(what) + " must be at most 1 h, got " + ms(d));
    }
  }
  if (options.node_timeout.count() <= 0) {
    return Error(errc::invalid_argument, "node_timeout must be positive");
  }
  if (options.connect_timeout.count() <= 0) {
    return Error(errc::invalid_argument, "connect_timeout must be positive");
  }
  if (options.reconnect_backoff_min.count() <= 0 ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return Error(errc::invalid_argument, "reconnect backoff must satisfy 0 < min <= max");
  }
  if (!(options.drift_factor >= 0.0 && options.drift_factor < 1.0)) {
    return Error(errc::invalid_argument, "drift_factor must be in [0, 1)");
  }
  std::vector<net::NodeAddress> addresses;
  std::set<std::string> seen;
  bool any_tls = false;
  for (const auto& url : options.nodes) {
    auto addr = net::parse_node_url(url);
    if (!addr) return std::move(addr).error();
    // Redlock's safety rests on the nodes being independent: the same server twice would
    // count one vote twice.
    if (!seen.insert(addr->identity()).second) {
      return Error(errc::invalid_argument, "node " + addr->display() + " is given twice");
    }
    any_tls = any_tls || addr->tls;
    addresses.push_back(std::move(*addr));
  }
  std::unique_ptr<asio::ssl::context> tls;
  if (any_tls) {
    auto ctx = make_tls_context(options.tls);
    if (!ctx) return std::move(ctx).error();
    tls = std::move(*ctx);
  }
  // The last reference may go on an io thread (a Task's frame ends there after its caller got
  // its value and went on) or on the watchdog's (an on_lost callback dropping the last Lease):
  // neither can join itself, so another thread ends the client.
  return std::shared_ptr<ClientCore>(
      new ClientCore(options, std::move(tls), addresses), [](ClientCore* core) {
        if (engine::on_client_thread()) {
          engine::background_thread([core] { delete core; }).detach();
        } else {
          delete core;
        }
      });
}

ClientCore::ClientCore(const ClientOptions& options, std::unique_ptr<asio::ssl::context> tls,
                       const std::vector<net::NodeAddress>& addresses)
    : options_(options),
      tls_(std::move(tls)),
      waiters_(nodes_),
      nodes_(
          addresses,
          net::ConnectionOptions{
              options.connect_timeout, options.reconnect_backoff_min, options.reconnect_backoff_max,
              std::max(std::chrono::milliseconds(5000), options.node_timeout * 10), tls_.get()},
          options.node_timeout,
          [this](const std::string& channel, const std::string& payload) {
            waiters_.on_message(channel, payload);
          },
          options.observer.get()),
      lock_(nodes_, options.drift_factor, options.observer.get(),
            lock::MembershipOptions{options.allow_eviction, options.start_from_quorum,
                                    options.connect_timeout, options.node_timeout}),
      holds_(lock_),
      watchdog_(lock_, options.observer.get()) {}

std::optional<Error> ClientCore::check_name(std::string_view name) {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
  if (lock::names_a_node_key(name)) {
    return Error(
        errc::invalid_argument,
        "lock name '" + std::string(name) + "' is a key dlock keeps on every node: choose another");
  }
  if (lock::names_a_dlock_key(name)) {
    return Error(errc::invalid_argument, "lock name '" + std::string(name) +
                                             "' is a key dlock keeps for another lock's name "
                                             "(dlock:fence:, dlock:readers:, dlock:queue:, ...): "
                                             "choose another");
  }
  return std::nullopt;
}

std::optional<Error> ClientCore::check(std::string_view name, std::chrono::milliseconds ttl) const {
  if (auto bad = check_name(name)) return bad;
  if (ttl.count() <= 0) {
    return Error(errc::invalid_argument, "ttl must be positive, got " + ms(ttl));
  }
  if (ttl > kMaxTtl) {
    // Also keeps every deadline computed from it (and the quarantines it sets on the nodes)
    // far from overflowing.
    return Error(errc::invalid_argument, "ttl must be at most 365 days, got " + ms(ttl));
  }
  if (auto d = lock_.drift(ttl); ttl <= d) {
    return Error(errc::invalid_argument,
                 "ttl of " + ms(ttl) + " is not larger than the clock drift allowance of " + ms(d));
  }
  return std::nullopt;
}

void ClientCore::add_pending_wait(std::weak_ptr<AsyncCancel> cancel) {
  std::lock_guard lock(pending_mu_);
  if (pending_waits_.size() >= prune_pending_at_) {  // amortized: at most doubling between
    std::erase_if(pending_waits_, [](const auto& w) { return w.expired(); });
    prune_pending_at_ = std::max<std::size_t>(64, 2 * pending_waits_.size());
  }
  pending_waits_.push_back(std::move(cancel));
}

std::vector<std::shared_ptr<AsyncCancel>> ClientCore::pending_waits() {
  std::lock_guard lock(pending_mu_);
  std::vector<std::shared_ptr<AsyncCancel>> out;
  for (const auto& w : pending_waits_) {
    if (auto c = w.lock()) out.push_back(std::move(c));
  }
  return out;
}

}  // namespace dlock::detail

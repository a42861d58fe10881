// SPDX-License-Identifier: MIT
#include <dlock/client.h>
#include <dlock/semaphore.h>

#include <set>
#include <stop_token>
#include <thread>
#include <variant>

#include "client_core.h"
#include "engine/background_thread.h"
#include "engine/run.h"
#include "lock/keys.h"
#include "lock/lease_state.h"
#include "lock/owner.h"
#include "lock/validity.h"
#include "net/node_address.h"
#include "operations.h"

namespace dlock {
namespace detail {
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

// Shared by a Client's copies. The last one to go cancels the asio API's pending waits (as an
// asio I/O object does when destroyed), then waits for what the client still runs in the
// background (those waits' clean-up, other asio operations, releases sent from the io thread)
// at most twice the node timeout (one attempt and the release of what it got): a program that
// ends right after must not cut a release short and leave the lock for a whole ttl. Not on a
// thread of a client's own, which that work may need. `core` is the last copy's, which the
// Client destroys after this.
class LastCopy {
 public:
  explicit LastCopy(ClientCore* core) : core_(core) {}
  ~LastCopy() {
    if (engine::on_client_thread()) return;
    cancel_pending_waits(*core_);
    (void)core_->in_flight()->wait_idle_until(std::chrono::steady_clock::now() +
                                              2 * core_->node_timeout());
  }
  LastCopy(const LastCopy&) = delete;
  LastCopy& operator=(const LastCopy&) = delete;

 private:
  ClientCore* core_;
};

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
            lock::MembershipOptions{options.allow_eviction, options.start_from_quorum}),
      holds_(lock_),
      watchdog_(lock_, options.observer.get()) {}

std::optional<Error> ClientCore::check(std::string_view name, std::chrono::milliseconds ttl) const {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
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

}  // namespace detail

namespace {

// One attempt on this thread.
std::variant<Lease, lock::Refused> attempt(const std::shared_ptr<detail::ClientCore>& core,
                                           std::string_view name, const LockOptions& options,
                                           const OwnerToken& owner,
                                           const std::optional<lock::FairTicket>& fair,
                                           lock::HoldKind kind) {
  return engine::run_sync(
      detail::attempt_task(core, std::string(name), options, owner, fair, !options.owner, kind));
}

// Client::lock's wait (lock/wait.h), on this thread: attempts until acquired, refused for good,
// cancelled or out of time.
Result<Lease> lock_waiting(const std::shared_ptr<detail::ClientCore>& core, std::string_view name,
                           std::chrono::milliseconds wait, const LockOptions& options,
                           std::stop_token stop, detail::Rounds& rounds, lock::HoldKind kind) {
  if (wait.count() < 0) return Error(errc::invalid_argument, "wait must not be negative");
  if (auto bad = detail::check_options(*core, name, options)) return std::move(*bad);
  if (kind == lock::HoldKind::read) {
    if (auto bad = detail::check_shared(options)) return std::move(*bad);
  }
  const std::string key(name);
  const OwnerToken owner = detail::owner_for(options);
  const std::optional<lock::FairTicket> fair = detail::fair_ticket(options, wait.count() > 0);
  detail::LockAttempts attempts(core, key, options, owner, fair, kind, lock::WaitOn::caller_thread,
                                rounds);
  lock::WaitCancel cancel;
  std::stop_callback on_stop(stop, [&cancel] { cancel.cancel(); });
  auto waited = engine::run_sync(
      lock::wait_task(detail::lock_wait_plan(*core, key, wait, options, owner, fair, kind),
                      detail::wait_context(*core, lock::WaitOn::caller_thread), attempts, cancel));
  if (!waited) return std::move(waited).error();
  return std::move(*attempts.lease);
}

}  // namespace

Client::Client(std::shared_ptr<detail::ClientCore> core)
    : core_(std::move(core)), last_copy_(std::make_shared<detail::LastCopy>(core_.get())) {}

// Swaps, so the old value goes as a destructor takes it: the last copy's wait, then the core.
Client& Client::operator=(Client other) noexcept {
  std::swap(core_, other.core_);
  std::swap(last_copy_, other.last_copy_);
  return *this;
}

Result<Client> Client::create(ClientOptions options) {
  auto core = detail::ClientCore::create(options);
  if (!core) return std::move(core).error();
  return Client(std::move(*core));
}

namespace {

Result<Lease> try_once(const std::shared_ptr<detail::ClientCore>& core, std::string_view name,
                       const LockOptions& options, lock::HoldKind kind) {
  const auto started = detail::observe_start(*core);
  detail::Rounds rounds;
  auto result = [&]() -> Result<Lease> {
    if (auto bad = detail::check_options(*core, name, options)) return std::move(*bad);
    if (kind == lock::HoldKind::read) {
      if (auto bad = detail::check_shared(options)) return std::move(*bad);
    }
    ++rounds.sent;
    auto r = attempt(core, name, options, detail::owner_for(options),
                     detail::fair_ticket(options, false), kind);
    if (auto* refused = std::get_if<lock::Refused>(&r)) {
      rounds.refused(refused->error);
      return std::move(refused->error);
    }
    return std::move(std::get<Lease>(r));
  }();
  detail::report_acquire(*core, name, result, started, rounds);
  return result;
}

Result<Lease> wait_for(const std::shared_ptr<detail::ClientCore>& core, std::string_view name,
                       Millis wait, const LockOptions& options, std::stop_token stop,
                       lock::HoldKind kind) {
  const auto started = detail::observe_start(*core);
  detail::Rounds rounds;
  auto result = lock_waiting(core, name, wait, options, std::move(stop), rounds, kind);
  detail::report_acquire(*core, name, result, started, rounds);
  return result;
}

}  // namespace

Result<Lease> Client::try_lock(std::string_view name, const LockOptions& options) {
  return try_once(core_, name, options, lock::HoldKind::write);
}

Result<Lease> Client::lock(std::string_view name, Millis wait, const LockOptions& options,
                           std::stop_token stop) {
  return wait_for(core_, name, wait, options, std::move(stop), lock::HoldKind::write);
}

Result<Lease> Client::try_lock_shared(std::string_view name, const LockOptions& options) {
  return try_once(core_, name, options, lock::HoldKind::read);
}

Result<Lease> Client::lock_shared(std::string_view name, Millis wait, const LockOptions& options,
                                  std::stop_token stop) {
  return wait_for(core_, name, wait, options, std::move(stop), lock::HoldKind::read);
}

namespace {

// Client::unlock and unlock_shared: the hold of `kind`, by owner.
Result<void> unlock_by_owner(detail::ClientCore& core, std::string_view name,
                             const OwnerToken& owner, lock::HoldKind kind) {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
  if (owner.empty()) return Error(errc::invalid_argument, "owner must not be empty");
  auto r = core.algorithm().release(lock::HoldId{std::string(name), owner, "", kind});
  // This client's own leases of that hold, if any, are over: they must not report held.
  core.holds().forget(std::string(name), owner, kind);
  return r;
}

// Client::extend and extend_shared: the hold of `kind`, by owner.
Result<Millis> extend_by_owner(detail::ClientCore& core, std::string_view name,
                               const OwnerToken& owner, Millis ttl, lock::HoldKind kind) {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
  if (owner.empty()) return Error(errc::invalid_argument, "owner must not be empty");
  if (auto bad = core.check(name, ttl)) return std::move(*bad);
  // No lease here says how long the hold was valid, so the round may last up to the new ttl:
  // what the nodes re-arm lives ttl from when they answer, all after `start`, and the judge
  // counts the validity from `start`.
  const auto start = lock::Clock::now();
  auto until = core.algorithm().extend(lock::HoldId{std::string(name), owner, "", kind}, ttl,
                                       start + std::chrono::milliseconds(ttl));
  if (!until) return std::move(until).error();
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(*until - lock::Clock::now());
  if (left.count() <= 0) {
    return Error(errc::timeout, "lock '" + std::string(name) + "': extended too late to be valid");
  }
  return Millis(left);
}

}  // namespace

Result<void> Client::unlock(std::string_view name, const OwnerToken& owner) {
  return unlock_by_owner(*core_, name, owner, lock::HoldKind::write);
}

Result<void> Client::unlock_shared(std::string_view name, const OwnerToken& owner) {
  return unlock_by_owner(*core_, name, owner, lock::HoldKind::read);
}

Result<Millis> Client::extend(std::string_view name, const OwnerToken& owner, Millis ttl) {
  return extend_by_owner(*core_, name, owner, ttl, lock::HoldKind::write);
}

Result<Millis> Client::extend_shared(std::string_view name, const OwnerToken& owner, Millis ttl) {
  return extend_by_owner(*core_, name, owner, ttl, lock::HoldKind::read);
}

Result<LockStatus> Client::status(std::string_view name) {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
  return core_->algorithm().inspect(std::string(name));
}

Result<std::vector<ForcedRelease>> Client::force_release(std::string_view name,
                                                         bool include_foreign) {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
  return core_->algorithm().force_release(std::string(name), include_foreign);
}

Result<std::size_t> Client::resize_semaphore(std::string_view name, std::size_t permits) {
  if (name.empty()) return Error(errc::invalid_argument, "semaphore name must not be empty");
  if (permits == 0 || permits > Semaphore::kMaxPermits) {
    return Error(errc::invalid_argument, "a semaphore has 1 to " +
                                             std::to_string(Semaphore::kMaxPermits) +
                                             " permits, got " + std::to_string(permits));
  }
  return core_->algorithm().resize_permits(std::string(name), permits, Semaphore::kMaxPermits);
}

std::size_t Client::node_count() const {
  return core_->node_count();
}
std::size_t Client::quorum() const {
  return core_->algorithm().quorum();
}

OwnerToken Client::default_owner() {
  return lock::thread_owner();
}

}  // namespace dlock

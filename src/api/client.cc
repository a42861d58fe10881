// SPDX-License-Identifier: MIT
#include <dlock/client.h>
#include <dlock/semaphore.h>

#include <stop_token>
#include <thread>
#include <variant>

#include "core/client_core.h"
#include "core/operations.h"
#include "engine/run.h"
#include "lock/keys.h"
#include "lock/lease_state.h"
#include "lock/owner.h"
#include "lock/validity.h"

namespace dlock {
namespace detail {

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

}  // namespace detail

namespace {

// One attempt on this thread.
std::variant<Lease, lock::Refused> attempt(const std::shared_ptr<detail::ClientCore>& core,
                                           std::string_view name, const LockOptions& options,
                                           OwnerToken owner,
                                           const std::optional<lock::FairTicket>& fair,
                                           lock::HoldKind kind) {
  return engine::run_sync(detail::attempt_task(core, std::string(name), options, std::move(owner),
                                               fair, !options.owner, kind));
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
  auto waited =
      lock::wait_sync(detail::lock_wait_plan(*core, key, wait, options, owner, fair, kind),
                      detail::wait_context(*core, lock::WaitOn::caller_thread), attempts, cancel);
  if (!waited) return std::move(waited).error();
  return detail::hand_over(std::move(*attempts.lease), key);
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
Result<void> unlock_by_owner(const std::shared_ptr<detail::ClientCore>& core, std::string_view name,
                             const OwnerToken& owner, lock::HoldKind kind) {
  if (auto bad = detail::check_owned(*core, name, owner)) return std::move(*bad);
  return engine::run_sync(detail::unlock_owned_task(core, std::string(name), owner, kind));
}

// Client::extend and extend_shared: the hold of `kind`, by owner.
Result<Millis> extend_by_owner(const std::shared_ptr<detail::ClientCore>& core,
                               std::string_view name, const OwnerToken& owner, Millis ttl,
                               lock::HoldKind kind) {
  if (auto bad = detail::check_owned(*core, name, owner, ttl)) return std::move(*bad);
  return engine::run_sync(detail::extend_owned_task(core, std::string(name), owner, ttl, kind));
}

}  // namespace

Result<void> Client::unlock(std::string_view name, const OwnerToken& owner) {
  return unlock_by_owner(core_, name, owner, lock::HoldKind::write);
}

Result<void> Client::unlock_shared(std::string_view name, const OwnerToken& owner) {
  return unlock_by_owner(core_, name, owner, lock::HoldKind::read);
}

Result<Millis> Client::extend(std::string_view name, const OwnerToken& owner, Millis ttl) {
  return extend_by_owner(core_, name, owner, ttl, lock::HoldKind::write);
}

Result<Millis> Client::extend_shared(std::string_view name, const OwnerToken& owner, Millis ttl) {
  return extend_by_owner(core_, name, owner, ttl, lock::HoldKind::read);
}

Result<LockStatus> Client::status(std::string_view name) {
  if (name.empty()) return Error(errc::invalid_argument, "lock name must not be empty");
  return engine::run_sync(detail::status_task(core_, std::string(name)));
}

Result<std::vector<ForcedRelease>> Client::force_release(std::string_view name,
                                                         bool include_foreign) {
  // Not a node key: --foreign would delete dlock's own bookkeeping.
  if (auto bad = detail::ClientCore::check_name(name)) return std::move(*bad);
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

// SPDX-License-Identifier: MIT
// dlock/lease.h: Lease, the RAII handle of a held lock.
//
// A Lease is returned by Client::try_lock / Client::lock. It knows the owner, the fencing token
// and until when the lock is valid. Destroying a held Lease releases the lock (best effort; the
// destructor never throws). Call unlock() to see the outcome.
//
//   auto lease = client.lock("reports", std::chrono::seconds(5), opts);
//   if (!lease) return fail(lease.error());
//   write_report(lease->fencing_token());
//   if (auto r = lease->unlock(); !r) log(r.error().message());
//
// States and what each call does:
//
//   state     | unlock()                  | extend(ttl)                   | destructor
//   ----------+---------------------------+-------------------------------+-----------------
//   held      | releases on all nodes* -> | re-arms ttl on a quorum (never| releases on all
//             | released                  | shortens it); on failure after| nodes*
//             |                           | validity: lost                |
//   released  | ok, no-op (the first      | errc::not_owner               | nothing
//             | unlock()'s error again if |                               |
//             | it did not release)       |                               |
//   lost      | cleans up on all nodes*,  | errc::lock_lost               | cleans up on all
//             | returns errc::lock_lost   |                               | nodes*
//   (moved)   | errc::invalid_argument    | errc::invalid_argument        | nothing
//
// A lease is lost when the watchdog (LockOptions::auto_renew) could not renew it in time,
// when extend() or the watchdog found its hold gone (then every reentrant lease of the same
// hold is lost), or when its owning thread exited. (*) Reentrant leases of one owner in one
// client share one hold: only the last of them to end sends the release, and only that hold
// (by its id) is released, never a newer hold of the same owner.
//
// Thread-safety: a Lease may be used from several threads; calls are serialized internally.
// It may be moved to another thread or task and unlocked there: the owner is in the lease, not
// in the thread that calls. With the default owner and auto_renew, renewal still follows the
// thread that took it (see client.h, "Owners").
#pragma once

#include <dlock/result.h>
#include <dlock/types.h>

#include <chrono>
#include <memory>
#include <string>

namespace dlock {

namespace detail {
class ClientCore;
struct LeaseState;
struct Access;
}  // namespace detail

class Lease {
 public:
  Lease() = default;  // an empty lease that holds nothing
  Lease(Lease&&) noexcept = default;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();

  // Releases the lock on all nodes. Returns errc::lock_lost when fewer than a quorum still
  // knew this owner (the lease had expired or was taken over): the lock was not exclusively
  // ours until now. Blocks for at most one node timeout. The lease ends whatever the outcome: a
  // second call sends nothing, and returns the first one's error if that did not release the
  // lock (its key then lives until the ttl; Client::unlock(name, owner) releases it by name).
  Result<void> unlock();

  // Re-arms the lock's ttl on all nodes; succeeds when a quorum did so before the current
  // validity ended. Errors: errc::lock_lost (no longer ours), errc::quorum_not_reached (too few
  // nodes answered; the old validity still stands), errc::invalid_argument (bad ttl).
  Result<void> extend(Millis ttl);
  // Same, with the ttl the lock was taken with.
  Result<void> extend();

  // Time left before the lock may be taken by someone else, by our own monotonic clock, with
  // the drift already subtracted. Zero once it has passed or the lease is not held.
  std::chrono::milliseconds validity() const;

  // Lets go of the lease without releasing the lock, to hand it to another process (the lock
  // service, a job runner): the lock stays on the nodes until its ttl ends, or until
  // Client::unlock(name, owner) releases it or Client::extend(name, owner, ttl) re-arms it,
  // from any client. Nothing in this client renews it any more, and the lease becomes empty.
  // Returns the owner. Errors (nothing changes): errc::invalid_argument (empty lease),
  // errc::not_owner (released), errc::lock_lost (lost or expired). Requires: the lease is the
  // only one of its hold (not reentrant: another lease of the hold would release the lock when
  // it ends). This client then no longer knows the hold, so its own next acquisition of the
  // same name and owner takes the handed-over hold over (a new hold, a new fencing token)
  // instead of being reentrant or refused. Blocks briefly (the client's bookkeeping, no round
  // trip); not from an asio completion that runs on the client's io thread.
  Result<OwnerToken> detach();
  // Held, not released, not lost, and validity left.
  bool is_held() const;
  // True once the watchdog gave up on it, or extend() found it gone.
  bool lost() const;

  const std::string& name() const;
  const OwnerToken& owner() const;
  // A read (shared) hold: from Client::try_lock_shared / lock_shared or SharedMutex.
  bool shared() const;
  // Grows with every acquisition of this name (see docs/fencing.md). Reentrant acquisitions
  // share the token of the outermost one.
  FencingToken fencing_token() const;
  std::chrono::milliseconds ttl() const;

 private:
  friend struct detail::Access;  // the library makes leases (src/core/access.h)
  Lease(std::shared_ptr<detail::ClientCore> core, std::shared_ptr<detail::LeaseState> state)
      : core_(std::move(core)), state_(std::move(state)) {}
  std::shared_ptr<detail::ClientCore> core_;   // keeps the connections alive
  std::shared_ptr<detail::LeaseState> state_;  // shared with the client's watchdog
};

}  // namespace dlock

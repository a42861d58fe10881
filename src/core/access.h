// SPDX-License-Identifier: MIT
// detail::Access: the library's own way into the public handles' internals (their constructors
// and members are private, so users cannot build a Lease from internal types). The one
// definition of the friend that client.h and lease.h declare.
#pragma once

#include <dlock/client.h>
#include <dlock/lease.h>

#include <memory>

namespace dlock::detail {

class ClientCore;
struct LeaseState;

struct Access {
  static const std::shared_ptr<ClientCore>& core(const Client& c) { return c.core_; }
  static const std::shared_ptr<ClientCore>& core(const Lease& l) { return l.core_; }
  static const std::shared_ptr<LeaseState>& state(const Lease& l) { return l.state_; }
  static Lease make_lease(std::shared_ptr<ClientCore> core, std::shared_ptr<LeaseState> state) {
    return Lease(std::move(core), std::move(state));
  }
  static void empty(Lease& l) {
    l.core_.reset();
    l.state_.reset();
  }
};

// Lets go of a lease without releasing the lock, for `dlock acquire`, which exits right after:
// the lock stays on the nodes until its ttl ends or Client::unlock(name, owner) releases it.
// Nothing renews it any more; `lease` becomes empty. Returns the owner to release it with.
// Refused (nothing changes) for an empty lease (invalid_argument), a released one (not_owner),
// and a lost or expired one (lock_lost). The lease must be the only one of its hold: another
// lease of the same hold in this client would release the lock when it ends. Not on an io
// thread (it waits for the client's bookkeeping).
//
// Not public: this client no longer knows the hold, so a later acquisition of the same name and
// owner by it would take the handed-away hold over (acquire.lua takes over an older hold of the
// same client). A process that goes on using the client must not hand a lock away like this.
Result<OwnerToken> detach(Lease& lease);

}  // namespace dlock::detail

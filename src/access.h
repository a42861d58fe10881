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
};

}  // namespace dlock::detail

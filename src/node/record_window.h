// SPDX-License-Identifier: MIT
// RecordWindow: what a server node knows of its server's record of lease ttls from the grants it
// saw, so that the acquisitions of the next half ttl need not check the record (issue 32: a
// ZSCORE and a PEXPIRETIME in every grant were about a tenth of a lock cycle's Redis CPU).
//
// The record (dlock:max-ttl) must reach past the end of every lease a server granted, for as
// long as the lease may live: a restart quarantine is computed from it. A grant of an
// acquisition that checks it (Call::record_known_arg sent as built) leaves the entry of its ttl
// T reaching at least 1.5 T past the moment the script ran (acquire.lua writes two ttls when
// it reaches less), and nothing but a deletion by hand (DEL, FLUSHALL), an eviction or a new
// server process shortens an entry: a client's retraction removes only its announcements,
// never a grant's bare ttl, and every other write is ZADD GT. So a lease of at most T granted
// by a call that is answered within 0.5 T of that script's run ends inside the record. The
// script ran after the call was sent, and a call answered after its node deadline is not
// counted (its grant is given back), so it suffices that the deadline of the call is at most
// 0.5 T after the sending of the call that checked: covers().
//
// Bound to the connection epoch: a new connection may reach a new server process (a restart
// in place, a failover behind one address) whose record is another, so a window learnt on one
// connection covers only requests bound to it (net::Connection::send's epoch: a request that
// would meet a new connection fails instead). A deletion by hand or an eviction (only with
// ClientOptions::allow_eviction) is found within half a ttl instead of at the next grant:
// docs/safety.md, "The record of lease ttls".
//
// Any thread: a borrowed round (the blocking API) sends and reads on the caller's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

#include "net/connection.h"

namespace dlock::node {

class RecordWindow {
 public:
  // How far past the checking script's run the record reaches: 1.5 ttl, less what a server
  // clock that runs up to 1% fast (the drift the lock's validity allows for, lock/validity.h)
  // takes off it, and 2 ms of expiry granularity (as record_lives_until, node/replica_confirm.h).
  static constexpr std::chrono::milliseconds reach(std::int64_t ttl) {
    const std::int64_t reach = ttl + ttl / 2;
    return std::chrono::milliseconds(reach - (reach + 99) / 100 - 2);
  }

  // A grant, by a call of `ttl` that checked the record, sent at `sent` and answered on
  // connection epoch `epoch`. It replaces what was known unless that covers as much or more
  // (the same connection, a ttl as large, as long): one window, the latest, which is all a
  // client that uses one ttl needs; a client of several ttls checks a little more often.
  void granted(std::int64_t ttl, std::uint64_t epoch, net::Clock::time_point sent) {
    const net::Clock::time_point until = sent + reach(ttl);
    std::lock_guard<std::mutex> lock(mutex_);
    if (epoch == epoch_ && ttl <= ttl_ && until <= until_) return;
    ttl_ = ttl;
    epoch_ = epoch;
    until_ = until;
  }

  // Whether a lease of `ttl`, granted by a call bound to connection epoch `epoch` that counts
  // only if answered by `deadline`, ends inside the record.
  bool covers(std::int64_t ttl, std::uint64_t epoch, net::Clock::time_point deadline) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return epoch != 0 && epoch == epoch_ && ttl <= ttl_ &&
           deadline + std::chrono::milliseconds(ttl) <= until_;
  }

 private:
  mutable std::mutex mutex_;
  std::int64_t ttl_ = 0;
  std::uint64_t epoch_ = 0;
  net::Clock::time_point until_{};
};

}  // namespace dlock::node

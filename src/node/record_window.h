// SPDX-License-Identifier: MIT
// RecordWindow: what a server node knows of its server's record of lease ttls from the grants it
// saw, so that the acquisitions of the next half ttl need not check the record (issue 32: a
// ZSCORE and a PEXPIRETIME in every grant were about a tenth of a lock cycle's Redis CPU).
//
// The record (dlock:max-ttl) must reach past the end of every lease a server granted, for as
// long as the lease may be used: a restart quarantine is computed from it. A grant of an
// acquisition that checks it (Call::record_known_arg sent as built) leaves the entry of its ttl
// T reaching at least 1.5 T past the moment the script ran (acquire.lua writes two ttls when
// it reaches less), and nothing but a deletion by hand (DEL, FLUSHALL), an eviction or a new
// server process shortens an entry: a client's retraction removes only its announcements,
// never a grant's bare ttl, and every other write is ZADD GT. The script ran after the call was
// sent, so the record reaches 1.5 T past that sending, less what a server clock that runs fast
// by up to the lock's drift factor takes off it (reach()). A lease of at most T granted by a
// later call is used at most T past that call's sending (its validity is counted from before
// the send), and the call is sent before its node deadline, so the lease is used inside the
// record when the call's deadline plus T is inside the reach: covers(). (Its key on the server
// ends by then too when the reply comes by the deadline; a later reply is not waited for.)
//
// Bound to the connection epoch: a new connection may reach a new server process (a restart
// in place, a failover behind one address) whose record is another, so a window learnt on one
// connection covers only requests bound to it (net::Connection::send's epoch: a request that
// would meet a new connection fails instead; ServerNode sends as built when the server may
// have closed the connection). A deletion by hand is found within half a ttl instead of at the
// next grant: docs/safety.md. Not used where keys may be evicted (ClientOptions::allow_eviction:
// the record, untouched by skipped checks, would be the coldest key) or where the record is per
// slot or confirmed on replicas (Sharding::remembers_records).
//
// Any thread: a borrowed round (the blocking API) sends and reads on the caller's thread.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>

#include "net/connection.h"

namespace dlock::node {

// How long (this client's clock) a record a server keeps for `span` ms of its own clock lives at
// least: a server clock that runs up to `drift` fast (the lock's drift factor, the drift its
// validity allows for: lock/validity.h) ends it that share of `span` sooner (rounded up), and
// expiry granularity 2 ms sooner. Shared with record_lives_until (node/replica_confirm.h).
inline std::chrono::milliseconds drifted_span(std::int64_t span, double drift) {
  const auto drifted = static_cast<std::int64_t>(std::ceil(static_cast<double>(span) * drift));
  return std::chrono::milliseconds(span - drifted - 2);
}

class RecordWindow {
 public:
  // How far past the checking call's sending the record reaches, on this client's clock: 1.5
  // ttl (acquire.lua's ttl + floor(ttl / 2)) of the server's clock (drifted_span).
  static std::chrono::milliseconds reach(std::int64_t ttl, double drift) {
    return drifted_span(ttl + ttl / 2, drift);
  }

  // A grant, by a call of `ttl` that checked the record, sent at `sent` and answered on
  // connection epoch `epoch`; `drift` the lock's drift factor. It replaces what was known unless
  // that covers as much or more (the same connection, a ttl as large, as long): one window, the
  // latest, which is all a client that uses one ttl needs; a client of several ttls checks a little
  // more often.
  void granted(std::int64_t ttl, double drift, std::uint64_t epoch, net::Clock::time_point sent) {
    const net::Clock::time_point until = sent + reach(ttl, drift);
    std::lock_guard<std::mutex> lock(mutex_);
    if (epoch == epoch_ && ttl <= ttl_ && until <= until_) return;
    ttl_ = ttl;
    epoch_ = epoch;
    until_ = until;
  }

  // Whether a lease of `ttl`, granted by a call bound to connection epoch `epoch` and sent
  // before its node deadline `deadline`, is used (and, answered by then, lives) inside the
  // record.
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

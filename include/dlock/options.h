// SPDX-License-Identifier: MIT
// dlock/options.h: ClientOptions (the nodes and how to talk to them) and LockOptions (one lock).
//
// Every field has a usable default; a client needs only its node URLs:
//
//   dlock::ClientOptions opts;
//   opts.nodes = {"redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"};
//   dlock::LockOptions lock_opts;
//   lock_opts.ttl = std::chrono::seconds(10);
#pragma once

#include <dlock/observer.h>
#include <dlock/result.h>
#include <dlock/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlock {

struct TlsOptions {
  // PEM file of the CA that signed the servers' certificates. Empty: the system's trust store.
  std::string ca_file;
  // Client certificate and key (PEM), for servers started with tls-auth-clients yes.
  std::string cert_file;
  std::string key_file;
  // Check the server's certificate and that it names the host of the URL. Default: true.
  bool verify_peer = true;
};

struct ClientOptions {
  // The independent Redis masters: one URL each, redis://[user:password@]host:port[/db] or
  // rediss://... for TLS. One node gives the single-instance lock, 3 or 5 give Redlock.
  std::vector<std::string> nodes;
  // Deadline for one command on one node, small compared to the ttl so a dead or stalled node
  // costs little. Default: 200 ms.
  Millis node_timeout{200};
  // Deadline for establishing a connection (TCP, TLS, AUTH, SELECT). Default: 1 s. Also how
  // long the client's first greeting of the nodes (its first acquisition) keeps trying while
  // nodes it needs connect or answer slower than node_timeout.
  Millis connect_timeout{1000};
  // After a failed connection attempt a node is not retried before this delay, which doubles
  // on each further failure up to reconnect_backoff_max. Defaults: 50 ms, 2 s.
  Millis reconnect_backoff_min{50};
  Millis reconnect_backoff_max{2000};
  // Clock drift allowance as a fraction of the ttl: drift = ttl * drift_factor + 2 ms.
  // Default: 0.01.
  double drift_factor = 0.01;
  // Let nodes vote whose maxmemory-policy may evict keys with a ttl (a maxmemory limit and any
  // policy but noeviction, e.g. the volatile-lru that managed Redis services often default
  // to). Such a server drops a held lock's key under memory pressure and grants it to the next
  // owner, so by default it never counts for a quorum, and errors name its policy. Turn this
  // on only where memory can never run out. Default: false.
  bool allow_eviction = false;
  // Restart protection needs the nodes to remember each other, so a lock set that no node
  // remembers (brand new, or, indistinguishably, every node restarted empty) starts only once
  // every node has answered: a node down or broken at first use blocks the set until it
  // answers. With this on, a quorum is enough; a node that was down then and later restarts
  // before it joined is not recognised as restarted. Default: false.
  bool start_from_quorum = false;
  TlsOptions tls;
  // Metrics and tracing hooks (dlock/observer.h; dlock::PrometheusObserver is a ready one).
  // Shared: one observer may serve several clients. Default: none (nothing is measured).
  std::shared_ptr<Observer> observer;
};

struct LockOptions {
  // Time to live of the lock on each node. Must exceed the drift (ttl * drift_factor + 2 ms).
  // Default: 30 s.
  Millis ttl{30000};
  // Watchdog renewal. true: the client re-arms the ttl every renew_every for as long as the
  // lease is held and, for the default owner, its thread lives; the lock then outlives any
  // pause of the holder shorter than the ttl, and ends at most one ttl after the holder dies.
  // false: an explicit lease that ends after ttl unless Lease::extend() is called.
  // Default: true.
  bool auto_renew = true;
  // Renewal period with auto_renew. Zero: ttl / 3. Default: zero.
  Millis renew_every{0};
  // Called once if the watchdog could not renew the lock on a quorum before its validity
  // ended: the lock is lost and is_held() is false. Runs on the client's watchdog thread; it
  // must not block for long (unlocking the lease from it is fine). Default: none.
  std::function<void(const Error&)> on_lost;
  // The owner. Default: this process (a 128-bit random id) plus the calling thread, so the same
  // thread can take the lock again (reentrancy). Name one to hand a lock to another thread or
  // process, and for each task of a thread pool or coroutine (tasks sharing a thread would
  // otherwise share an owner); it must then be unique among all contenders.
  std::optional<OwnerToken> owner;
  // While waiting, a release message wakes the waiter at once; without one it retries when
  // the holder's ttl has run out. retry_delay is the base of the random delay (jitter) added
  // after a lost race, and the retry period when nodes are unreachable. Default: 50 ms.
  Millis retry_delay{50};
  // Fair mode: waiters get the lock in arrival order (a queue in Redis, ordered the same on
  // every node) and a release wakes only the first in line (no thundering herd). All clients
  // of one name must use the same mode. Default: false.
  bool fair = false;
  // Fair mode: a waiter not heard of for this long is dropped from the queue (it died), so the
  // queue never stalls; live waiters check in every third of it. Also, in both modes, how long
  // a writer waiting for readers (SharedMutex) keeps new readers out without checking in.
  // Default: 5 s.
  Millis fair_waiter_timeout{5000};
  // Replica guard (opt-in), for nodes that are masters with replicas (a Sentinel-managed
  // master, a Redis Cluster): a node's grant counts only once WAIT confirmed that min_replicas
  // of its replicas received the lock's key within replica_timeout; otherwise that node counts
  // as failed for the attempt (and is cleaned up like any other). A failover that promotes a
  // confirmed replica then keeps the lock. It does not make the promoted replica be one of the
  // confirmed ones, nor the key durable on disk (docs/safety.md). replica_timeout must be
  // shorter than ClientOptions::node_timeout; each acquisition takes up to that much longer.
  // Default: 0 (off), 50 ms.
  std::size_t min_replicas = 0;
  Millis replica_timeout{50};
};

}  // namespace dlock

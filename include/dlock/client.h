// SPDX-License-Identifier: MIT
// dlock/client.h: Client, a set of N independent Redis masters and the locks taken on them.
//
// One algorithm serves 1 node (the single-instance lock) and N nodes (Redlock): every
// operation goes to all nodes at once and succeeds on a quorum of N/2+1 within the lock's
// validity (ttl - elapsed - drift).
//
//   auto client = dlock::Client::create({.nodes = {"redis://127.0.0.1:6379"}});
//   if (!client) { std::cerr << client.error().message() << "\n"; return 1; }
//   auto lease = client->lock("inventory", std::chrono::seconds(2));
//   if (lease) { /* exclusive until lease->validity() runs out */ }
//
// Thread-safety: a Client may be shared by any number of threads. Copies share the same
// connections (a Client is a handle). Connections are made lazily on first use and remade
// with backoff after a node restarts.
//
// Owners: who holds a lock is an OwnerToken. By default it is this process plus the calling
// thread, so a thread that locks again is reentrant, and the watchdog stops renewing when that
// thread exits. That default suits one thread per job. It does not suit a thread pool or
// coroutines: two tasks that run on one pool thread are one owner, and the second task's
// acquisition would be "reentrant" while the first task holds the lock. There, give every task
// its own LockOptions::owner (a job id, a UUID), or use the asio API (dlock/async.h), whose
// acquisitions are each their own owner unless named. A Lease may move between threads; its
// owner goes with it.
#pragma once

#include <dlock/lease.h>
#include <dlock/options.h>
#include <dlock/result.h>
#include <dlock/status.h>
#include <dlock/types.h>

#include <chrono>
#include <memory>
#include <stop_token>
#include <string_view>

namespace dlock {

namespace detail {
class ClientCore;
class LastCopy;
struct Access;
}  // namespace detail

// A handle on a set of nodes; copies share them (and their connections and threads). When the
// last copy goes, the asio API's waits still pending on it (async_lock, async_lock_shared,
// async_acquire_permit) end with errc::cancelled, as an asio I/O object cancels its operations
// when destroyed; then it waits for what still runs in the background (their clean-up, other
// asio operations, the release of a lock that a cancelled operation got anyway) for up to twice
// the node timeout, so that a program that ends right after leaves no lock behind. Leases keep
// what they need of the client and may outlive it.
class Client {
 public:
  // Checks the options (URLs, duplicates, timeouts) and prepares one connection per node.
  // Errors: errc::invalid_argument naming the bad option. Does not connect yet.
  static Result<Client> create(ClientOptions options);
  Client(const Client&) = default;
  Client(Client&&) noexcept = default;
  Client& operator=(Client other) noexcept;
  ~Client() = default;

  // One attempt: acquires `name` if it is free on a quorum of nodes (or already ours: the
  // count goes up). Errors: errc::lock_held (contention), errc::quorum_not_reached (too few
  // nodes answered), errc::invalid_argument. Anything taken on a failed attempt is released
  // on all nodes before returning. Blocks for about one round trip (at most the node timeout).
  Result<Lease> try_lock(std::string_view name, const LockOptions& options = {});

  // Like try_lock, but waits up to `wait` for a lock held by someone else. The waiter sleeps
  // until a release message wakes it, or the holder's ttl runs out (a crashed holder or a lost
  // message never strands it); no polling. With options.fair, in arrival order. Requesting a
  // stop on `stop` ends the wait with errc::cancelled. Errors: as try_lock, with
  // errc::wait_timeout instead of lock_held, and errc::cancelled.
  Result<Lease> lock(std::string_view name, Millis wait, const LockOptions& options = {},
                     std::stop_token stop = {});

  // Read (shared) locks on the same names: any number of readers hold `name` at once, and no
  // writer (try_lock / lock above are the write side) while they do. A writer that waits keeps
  // new readers out until it has had the lock (no writer starvation). Reentrant as above; the
  // writer may also take the read lock (a downgrade); a reader may not take the write lock
  // (errc::invalid_argument: it would wait for itself). options.fair is refused for readers
  // (invalid_argument); fair writers still wait for readers. Errors and waiting as for
  // try_lock / lock. See dlock/shared_mutex.h for the std::shared_mutex-like wrapper.
  Result<Lease> try_lock_shared(std::string_view name, const LockOptions& options = {});
  Result<Lease> lock_shared(std::string_view name, Millis wait, const LockOptions& options = {},
                            std::stop_token stop = {});
  // Releases one write hold of `name` by `owner` (a lock handed over across threads or processes).
  // Errors: errc::not_owner when no quorum knew `owner` (nothing was deleted).
  Result<void> unlock(std::string_view name, const OwnerToken& owner);
  // Re-arms the ttl of `owner`'s write hold of `name` on all nodes (a lock handed over across
  // threads or processes: Lease::detach, `dlock acquire`, the lock service), and returns the
  // validity it now has: the time left, from before the round trip, minus the drift. Succeeds
  // when a quorum still held it and re-armed it. Never shortens a ttl. Errors: errc::lock_lost
  // (no quorum knew `owner`: expired, released, or never held; nothing was re-armed where it
  // is gone), errc::quorum_not_reached (too few nodes answered; the old ttl still stands),
  // errc::invalid_argument. Blocks for about one round trip (at most the node timeout).
  Result<Millis> extend(std::string_view name, const OwnerToken& owner, Millis ttl);
  // The same for `owner`'s read hold of `name` (try_lock_shared / lock_shared, handed over with
  // Lease::detach): releases it (the lock is freed with its last reader), or re-arms its ttl.
  // Errors as unlock and extend.
  Result<void> unlock_shared(std::string_view name, const OwnerToken& owner);
  Result<Millis> extend_shared(std::string_view name, const OwnerToken& owner, Millis ttl);

  // What each node knows about `name`. Fails only for bad input; node errors are per node.
  Result<LockStatus> status(std::string_view name);

  // For operators: deletes `name` on every node whoever holds it, and wakes its waiters. A key
  // that is not a dlock lock (another library's) is kept unless `include_foreign`. The holder
  // is not told; its renewals fail and it loses the lock. Fails only for bad input.
  Result<std::vector<ForcedRelease>> force_release(std::string_view name,
                                                   bool include_foreign = false);

  // Changes the permit count of the semaphore `name` (dlock::Semaphore's name). The first
  // acquisition records a semaphore's count on the nodes, and a client that names another one
  // is refused (errc::invalid_argument) while any permit is held; the record goes with the last
  // permit. Growing is always allowed; shrinking to `permits` only while no permit numbered
  // `permits` or above is held (errc::lock_held otherwise; nothing changes). Clients of the old
  // count are refused afterwards. Returns the count the nodes had, 0 when none had a record (no
  // permit held: the next acquisition sets the count, nothing to resize). Errors:
  // invalid_argument (bad name or count), lock_held, quorum_not_reached (a node did not answer
  // and keeps the old count: call it again). Blocks for one or two rounds.
  Result<std::size_t> resize_semaphore(std::string_view name, std::size_t permits);

  std::size_t node_count() const;
  std::size_t quorum() const;

  // The owner used when LockOptions::owner is not set: a 128-bit random id of this process
  // (from the OS CSPRNG, renewed after fork) and the calling thread's id.
  static OwnerToken default_owner();

 private:
  friend struct detail::Access;
  explicit Client(std::shared_ptr<detail::ClientCore> core);
  std::shared_ptr<detail::ClientCore> core_;
  // Shared by this client's copies (declared last, so it goes first): the last copy to go
  // waits for what the client still does in the background.
  std::shared_ptr<detail::LastCopy> last_copy_;
};

}  // namespace dlock

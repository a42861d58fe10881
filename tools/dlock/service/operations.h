// SPDX-License-Identifier: MIT
// Operations: what the lock service does, whatever the transport (gRPC now, HTTP/JSON next).
// Thin adapters over dlock's public API, as etcd's v3lock is over its client: the library
// waits, fences and cleans up; this layer checks the input, names the owner, hands the lease
// over (Lease::detach) so that the lock outlives the call, and says what happened as a Code.
//
// Stateless: the owner token in a grant is all a later call needs, through any instance.
//
// Threads: no operation holds a thread while it waits for the nodes (dlock's asio API), and
// each completes on the thread that finishes it, the client's io thread, at once: no hand-off
// to another thread between the nodes' answer and the transport's. So `done` must never block
// (docs/service.md, "Threads": gRPC's Finish and StartWrite queue the answer; HTTP posts it to
// its own io thread; the keep-alive and watch streams take their mutex for a few fields). A
// grant is handed over with async_detach, as Lease::detach would wait on the io thread.
// The pool stays for what must not run where it is asked for: a refusal before anything is
// sent (`done` never runs inside the call), a completion that comes inside a cancellation (on
// the cancelling thread, which holds the PendingAcquire's mutex), and the keep-alive and watch
// timers (executor()).
#pragma once

#include <dlock/client.h>
#include <dlock/status.h>

#include <asio/cancellation_signal.hpp>
#include <asio/thread_pool.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace dlock::service {

// What a call's outcome was; each transport maps it to its own statuses (docs/service.md).
enum class Code {
  ok,
  invalid_argument,  // bad input
  held,              // held by another owner (a try, or an Acquire without wait)
  wait_timeout,      // still held by another when the wait (or the call's deadline) ran out
  not_owner,         // Extend / Release: the lock is not held by that owner (any more)
  unavailable,       // no quorum of Redis nodes answered in time: retry
  cancelled,         // the caller went away
  unimplemented,     // a part of the API this server does not serve yet
  // Security and limits (guard.h):
  unauthenticated,     // no bearer token, or one the token file does not have
  permission_denied,   // the name is outside the token's prefixes
  resource_exhausted,  // the caller has its maximum of concurrent waits: retry later
};

struct Failure {
  Code code;
  std::string message;
  // held / wait_timeout of an Acquire: how long the holder's lease still had on the nodes that
  // refused (the longest: Error::holder_ttl), if they said.
  std::optional<std::int64_t> holder_ttl_ms = std::nullopt;
};

template <typename T>
using Outcome = std::variant<T, Failure>;

// The Code for a library error, in the call that got it (a lost lock means "not that owner's"
// for extend; a timeout means "too late to be safe, try again" for every call).
Code code_for(const Error& error);

inline constexpr std::chrono::milliseconds kDefaultTtl{30000};

enum class Mode { exclusive, shared, permit };

struct AcquireInput {
  std::string name;
  std::optional<std::int64_t> ttl_ms;  // unset: kDefaultTtl
  std::int64_t wait_ms = 0;            // 0: try once
  std::string owner;                   // empty: a new random owner; must be empty for a permit
  Mode mode = Mode::exclusive;         // shared: a read hold; permit: one of `permits`
  std::uint32_t permits = 0;           // permit: 1 to Semaphore::kMaxPermits; else 0
  bool fair = false;
  // The caller's deadline, if any: the wait ends before it, so the answer can still reach it.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

struct Grant {
  std::string owner;
  std::uint64_t fencing_token = 0;
  std::int64_t validity_ms = 0;
  std::optional<std::uint32_t> permit;  // a permit: which one (0 to permits - 1)
};

// Which hold an Extend or Release is about: the owner's hold of `name` of `mode`; for a permit,
// the permit the grant named.
struct HoldRef {
  std::string name;
  std::string owner;
  Mode mode = Mode::exclusive;
  std::uint32_t permit = 0;
};

// The checks every transport shares, before anything is sent. Pure.
std::optional<Failure> check_acquire(const AcquireInput& in);
std::optional<Failure> check_owned(const HoldRef& hold);
std::optional<Failure> check_ttl(const std::optional<std::int64_t>& ttl_ms);
// How long to wait: wait_ms, shortened to end a little before the caller's deadline.
std::chrono::milliseconds wait_for(const AcquireInput& in,
                                   std::chrono::steady_clock::time_point now);

// A new owner token: 128 bits from the OS CSPRNG, hex.
std::string random_owner();

// One acquisition in flight: cancel() ends its wait (from any thread, at any time), and the
// library leaves nothing behind (docs/async.md).
class PendingAcquire {
 public:
  void cancel();

 private:
  friend class Operations;
  // cancel(), for a stopping service: the caller hears UNAVAILABLE (kStopping), not CANCELLED.
  void stop();

  std::mutex mu_;
  asio::cancellation_signal signal_;  // guarded by mu_ (asio's signal is not thread-safe)
  bool cancelled_ = false;
  bool stopping_ = false;
  bool finished_ = false;
};

// What a wait ended by a stopping service answers (UNAVAILABLE, HTTP 503).
inline constexpr char kStopping[] =
    "the service instance is stopping: retry through another instance";

class Operations {
 public:
  Operations(Client client, std::size_t threads);
  ~Operations();  // waits for every operation's `done` to return, then for the pool
  Operations(const Operations&) = delete;
  Operations& operator=(const Operations&) = delete;

  // `pending` (from make_pending) lets the caller cancel; `done` runs once.
  std::shared_ptr<PendingAcquire> make_pending();
  // SIGTERM: every acquisition in flight ends at once with UNAVAILABLE (kStopping), and every
  // later one is refused so. Leases already granted are untouched: they live in Redis.
  void stop_waits();
  void acquire(AcquireInput in, std::shared_ptr<PendingAcquire> pending,
               std::function<void(Outcome<Grant>)> done);
  void extend(HoldRef hold, std::optional<std::int64_t> ttl_ms,
              std::function<void(Outcome<std::int64_t>)> done);  // the validity in ms
  // By owner: whatever hold of the name the owner has. So a transport gives back a grant whose
  // answer never reached its caller only when the owner was made for that call (nobody else
  // can hold under it). A caller-named owner may meanwhile hold the name by a retry that took
  // the lost grant's hold over (acquire.lua: an older hold of the same client); releasing by
  // that owner would free the retry's live hold under its caller: two holders. Such a grant
  // lives out its ttl instead.
  void release(HoldRef hold, std::function<void(Outcome<bool>)> done);
  void status(std::string name, std::function<void(Outcome<LockStatus>)> done);
  // The pool's executor, for timers whose handlers call the operations (keep-alive).
  asio::thread_pool::executor_type executor() { return pool_.get_executor(); }

 private:
  void granted(Result<Lease> lease, const AcquireInput& in,
               const std::shared_ptr<PendingAcquire>& pending,
               const std::function<void(Outcome<Grant>)>& done);
  // The Failure for a refused acquisition; a held name's with its holder's ttl.
  Failure refusal(const Error& error, const AcquireInput& in);

  // Counts the operation from now until `done` has returned (and is destroyed): the destructor
  // waits for that, as `done` may run on the client's io thread, not the pool.
  template <typename T>
  std::function<void(T)> counted(std::function<void(T)> done);
  // A refusal made before anything was sent: `done` runs on the pool.
  template <typename T>
  void refuse(std::function<void(T)> done, Failure why);

  Client client_;
  asio::thread_pool pool_;
  std::mutex running_mu_;
  std::condition_variable idle_;
  std::size_t running_ = 0;  // guarded by running_mu_: operations whose `done` has not returned
  std::mutex mu_;
  bool stopping_ = false;                                // guarded by mu_
  std::vector<std::weak_ptr<PendingAcquire>> pendings_;  // guarded by mu_
};

}  // namespace dlock::service

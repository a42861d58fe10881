// SPDX-License-Identifier: MIT
#include "service/operations.h"

#include <dlock/async.h>
#include <dlock/semaphore.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/execution/blocking.hpp>
#include <asio/execution/context.hpp>
#include <asio/execution_context.hpp>
#include <asio/post.hpp>
#include <cerrno>
#include <functional>
#include <utility>
#include <vector>

namespace dlock::service {

Code code_for(const Error& error) {
  if (error.is(errc::invalid_argument)) return Code::invalid_argument;
  if (error.is(errc::lock_held)) return Code::held;
  if (error.is(errc::wait_timeout)) return Code::wait_timeout;
  if (error.is(errc::not_owner) || error.is(errc::lock_lost)) return Code::not_owner;
  if (error.is(errc::cancelled)) return Code::cancelled;
  // quorum_not_reached, timeout (a quorum too late to be valid), node errors: nothing was
  // granted or changed on a quorum, and trying again may work.
  return Code::unavailable;
}

std::optional<Failure> check_ttl(const std::optional<std::int64_t>& ttl_ms) {
  if (ttl_ms && *ttl_ms <= 0) {
    return Failure{Code::invalid_argument,
                   "ttl_ms must be positive, got " + std::to_string(*ttl_ms)};
  }
  return std::nullopt;
}

std::optional<Failure> check_acquire(const AcquireInput& in) {
  if (in.name.empty()) return Failure{Code::invalid_argument, "name must not be empty"};
  if (auto bad = check_ttl(in.ttl_ms)) return bad;
  if (in.wait_ms < 0) {
    return Failure{Code::invalid_argument,
                   "wait_ms must not be negative, got " + std::to_string(in.wait_ms)};
  }
  if (in.mode == Mode::permit) {
    if (in.permits == 0 || in.permits > Semaphore::kMaxPermits) {
      return Failure{Code::invalid_argument,
                     "permits must be 1 to " + std::to_string(Semaphore::kMaxPermits) +
                         " for mode PERMIT, got " + std::to_string(in.permits)};
    }
    // Every permit has an owner of its own, made by the library: one owner holding two
    // permits would be one reentrant hold of one slot.
    if (!in.owner.empty()) {
      return Failure{Code::invalid_argument, "mode PERMIT makes its own owner: leave owner empty"};
    }
  } else if (in.permits != 0) {
    return Failure{Code::invalid_argument, "permits is for mode PERMIT only"};
  }
  return std::nullopt;
}

std::optional<Failure> check_owned(const HoldRef& hold) {
  if (hold.name.empty()) return Failure{Code::invalid_argument, "name must not be empty"};
  if (hold.owner.empty()) return Failure{Code::invalid_argument, "owner must not be empty"};
  if (hold.mode == Mode::permit && hold.permit >= Semaphore::kMaxPermits) {
    return Failure{Code::invalid_argument, "permit must be below " +
                                               std::to_string(Semaphore::kMaxPermits) + ", got " +
                                               std::to_string(hold.permit)};
  }
  if (hold.mode != Mode::permit && hold.permit != 0) {
    return Failure{Code::invalid_argument, "permit is for mode PERMIT only"};
  }
  return std::nullopt;
}

std::chrono::milliseconds wait_for(const AcquireInput& in,
                                   std::chrono::steady_clock::time_point now) {
  std::chrono::milliseconds wait(in.wait_ms);
  if (!in.deadline) return wait;
  // End the wait a little before the deadline, so that the refusal, or a grant, still reaches
  // the caller: a grant it never hears of would keep the lock from everyone for a ttl.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*in.deadline - now);
  const auto margin =
      std::clamp(left / 10, std::chrono::milliseconds(5), std::chrono::milliseconds(100));
  return std::clamp(left - margin, std::chrono::milliseconds(0), wait);
}

std::string random_owner() {
  std::array<unsigned char, 16> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n > 0) got += static_cast<std::size_t>(n);
    // EINTR: again. Nothing else can fail for 16 bytes once the pool is initialised.
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex = "svc-";
  for (const unsigned char b : bytes) {
    hex += kHex[b >> 4];
    hex += kHex[b & 0xf];
  }
  return hex;
}

namespace {

// The library's acquisition of in.mode, completing with `handler`.
template <typename Handler>
void start_acquire(Client& client, const AcquireInput& in, std::chrono::milliseconds wait,
                   LockOptions options, Handler handler) {
  switch (in.mode) {
    case Mode::exclusive:
      if (wait.count() > 0) return async_lock(client, in.name, wait, options, std::move(handler));
      return async_try_lock(client, in.name, std::move(options), std::move(handler));
    case Mode::shared:
      if (wait.count() > 0) {
        return async_lock_shared(client, in.name, wait, options, std::move(handler));
      }
      return async_try_lock_shared(client, in.name, std::move(options), std::move(handler));
    case Mode::permit:
      // wait 0: one pass over the permits.
      return async_acquire_permit(client, in.name, in.permits, wait, std::move(options),
                                  std::move(handler));
  }
}

// Which permit of the semaphore `name` a permit's lease (named after its slot) is.
std::optional<std::uint32_t> permit_of(const std::string& name, std::uint32_t permits,
                                       const Lease& lease) {
  for (std::uint32_t i = 0; i < permits; ++i) {
    if (Semaphore::slot_name(name, i) == lease.name()) return i;
  }
  return std::nullopt;
}

// The lock an Extend or Release acts on: a permit is its slot's lock.
std::string lock_name(const HoldRef& hold) {
  return hold.mode == Mode::permit ? Semaphore::slot_name(hold.name, hold.permit) : hold.name;
}

// Set while an operation calls into the library: a completion that comes inside that call (a
// refusal of the library's before anything was sent) goes to the pool instead of running
// inside the caller's call.
thread_local bool t_starting = false;

// The executor of every operation's completion: runs it at once on the thread that completes
// it, the client's io thread, saving the hand-off to another thread. The library posts a
// completion only once the operation is over, from its io thread, so running it there is safe
// for handlers that never block (operations.h). It honours asio::post's blocking.never only in
// that the caller of post, the library, has nothing left to do in that call.
class AtOnce {
 public:
  explicit AtOnce(asio::thread_pool& pool) noexcept : pool_(&pool) {}
  template <typename F>
  void execute(F&& f) const {
    if (t_starting) return asio::post(*pool_, std::forward<F>(f));
    std::forward<F>(f)();
  }
  AtOnce require(asio::execution::blocking_t::never_t) const noexcept { return *this; }
  asio::execution_context& query(asio::execution::context_t) const noexcept { return *pool_; }
  friend bool operator==(const AtOnce& a, const AtOnce& b) noexcept { return a.pool_ == b.pool_; }
  friend bool operator!=(const AtOnce& a, const AtOnce& b) noexcept { return !(a == b); }

 private:
  asio::thread_pool* pool_;
};

// Marks the calling thread as inside a call into the library (t_starting), for its scope.
class Starting {
 public:
  Starting() noexcept : was_(std::exchange(t_starting, true)) {}
  ~Starting() { t_starting = was_; }
  Starting(const Starting&) = delete;
  Starting& operator=(const Starting&) = delete;

 private:
  const bool was_;
};

}  // namespace

template <typename T>
std::function<void(T)> Operations::counted(std::function<void(T)> done) {
  {
    std::lock_guard lock(running_mu_);
    ++running_;
  }
  return [this, done = std::move(done)](T outcome) mutable {
    {
      auto call = std::move(done);  // what it holds goes before the destructor may go on
      call(std::move(outcome));
    }
    std::lock_guard lock(running_mu_);
    if (--running_ == 0) idle_.notify_all();
  };
}

template <typename T>
void Operations::refuse(std::function<void(T)> done, Failure why) {
  asio::post(pool_, [done = std::move(done), why = std::move(why)] { done(why); });
}

// The acquisition's completion may come inside emit(), on this thread, which holds mu_: Starting
// sends it to the pool (granted() takes mu_).
void PendingAcquire::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  const Starting starting;
  if (!finished_) signal_.emit(asio::cancellation_type::terminal);
}

void PendingAcquire::stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  cancelled_ = true;
  const Starting starting;
  if (!finished_) signal_.emit(asio::cancellation_type::terminal);
}

std::shared_ptr<PendingAcquire> Operations::make_pending() {
  auto pending = std::make_shared<PendingAcquire>();
  std::lock_guard lock(mu_);
  std::erase_if(pendings_, [](const auto& w) { return w.expired(); });
  pendings_.push_back(pending);
  if (stopping_) pending->stop();
  return pending;
}

void Operations::stop_waits() {
  std::vector<std::shared_ptr<PendingAcquire>> stopping;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (const auto& weak : pendings_) {
      if (auto p = weak.lock()) stopping.push_back(std::move(p));
    }
    pendings_.clear();
  }
  for (const auto& p : stopping) p->stop();  // outside mu_: a completion may run at once
}

Operations::Operations(Client client, std::size_t threads)
    : client_(std::move(client)), pool_(threads) {}

Operations::~Operations() {
  {
    std::unique_lock lock(running_mu_);
    idle_.wait(lock, [this] { return running_ == 0; });
  }
  pool_.join();
}

void Operations::acquire(AcquireInput in, std::shared_ptr<PendingAcquire> pending,
                         std::function<void(Outcome<Grant>)> done) {
  done = counted(std::move(done));
  if (auto bad = check_acquire(in)) return refuse(std::move(done), std::move(*bad));
  LockOptions options;
  options.ttl = in.ttl_ms ? Millis(*in.ttl_ms) : Millis(kDefaultTtl);
  options.auto_renew = false;  // stateless: the caller extends (or keeps alive) itself
  options.fair = in.fair;
  if (in.mode != Mode::permit) {
    options.owner = OwnerToken(in.owner.empty() ? random_owner() : in.owner);
  }
  const auto wait = wait_for(in, std::chrono::steady_clock::now());
  auto handler = [this, in, pending, done, waits = in.wait_ms > 0](Result<Lease> lease) {
    // A wait that the deadline cut to nothing was still a wait that ran out.
    if (!lease && waits && lease.error().is(errc::lock_held)) {
      Error timed_out(errc::wait_timeout, lease.error().summary() + " (the call's deadline)",
                      lease.error().nodes());
      timed_out.set_holder_ttl(lease.error().holder_ttl());
      lease = std::move(timed_out);
    }
    granted(std::move(lease), in, pending, done);
  };
  // Under the mutex: a cancellation must not emit while the operation hooks its slot.
  std::lock_guard lock(pending->mu_);
  auto bound = asio::bind_cancellation_slot(pending->signal_.slot(),
                                            asio::bind_executor(AtOnce(pool_), std::move(handler)));
  if (pending->cancelled_) {
    pending->finished_ = true;
    Failure why = pending->stopping_ ? Failure{Code::unavailable, kStopping}
                                     : Failure{Code::cancelled, "call cancelled"};
    return refuse(std::move(done), std::move(why));
  }
  const Starting starting;
  start_acquire(client_, in, wait, std::move(options), std::move(bound));
}

void Operations::granted(Result<Lease> lease, const AcquireInput& in,
                         const std::shared_ptr<PendingAcquire>& pending,
                         const std::function<void(Outcome<Grant>)>& done) {
  bool cancelled = false;
  bool stopping = false;
  {
    std::lock_guard lock(pending->mu_);
    pending->finished_ = true;
    cancelled = pending->cancelled_;
    stopping = pending->stopping_;
  }
  // A wait the stopping service ended: the caller is told why, and to go elsewhere.
  // (Lease::unlock below does not wait on the io thread, and may on the pool.)
  if (stopping && (lease || lease.error().is(errc::cancelled))) {
    if (lease) (void)lease->unlock();  // granted meanwhile: nobody will hear of it
    return done(Failure{Code::unavailable, kStopping});
  }
  if (!lease) return done(refusal(lease.error(), in));
  if (cancelled) {
    // Nobody will hear of this grant: give it back rather than block the name for a ttl.
    (void)lease->unlock();
    return done(Failure{Code::cancelled, "call cancelled"});
  }
  Grant grant;
  grant.fencing_token = lease->fencing_token().value();
  grant.validity_ms = lease->validity().count();
  if (in.mode == Mode::permit) grant.permit = permit_of(in.name, in.permits, *lease);
  // From here on the lock outlives this call and this process. Asynchronous: the client's
  // bookkeeping of the hold may wait for another call of the same owner, which the io thread,
  // where this may run, must not block on.
  async_detach(*lease, asio::bind_executor(AtOnce(pool_), [grant = std::move(grant),
                                                           done](Result<OwnerToken> owner) mutable {
    if (!owner) return done(Failure{Code::unavailable, owner.error().message()});
    grant.owner = owner->str();
    done(std::move(grant));
  }));
}

Failure Operations::refusal(const Error& error, const AcquireInput& in) {
  Failure f{code_for(error), error.message()};
  // Held: the refusal itself says for how long (no further round trip); a permit's holders are
  // its slots', which say nothing of when a permit frees.
  const bool held = f.code == Code::held || f.code == Code::wait_timeout;
  if (held && in.mode != Mode::permit && error.holder_ttl()) {
    f.holder_ttl_ms = error.holder_ttl()->count();
  }
  return f;
}

void Operations::extend(HoldRef hold, std::optional<std::int64_t> ttl_ms,
                        std::function<void(Outcome<std::int64_t>)> done) {
  if (auto bad = check_owned(hold)) return refuse(std::move(done), std::move(*bad));
  if (auto bad = check_ttl(ttl_ms)) return refuse(std::move(done), std::move(*bad));
  const Millis ttl = ttl_ms ? Millis(*ttl_ms) : Millis(kDefaultTtl);
  const OwnerToken owner(hold.owner);
  auto handler = asio::bind_executor(
      AtOnce(pool_), [done = counted(std::move(done))](Result<Millis> validity) {
        if (!validity) return done(Failure{code_for(validity.error()), validity.error().message()});
        done(validity->count());
      });
  const Starting starting;
  if (hold.mode == Mode::shared)
    return async_extend_shared(client_, hold.name, owner, ttl, handler);
  async_extend(client_, lock_name(hold), owner, ttl, std::move(handler));
}

void Operations::release(HoldRef hold, std::function<void(Outcome<bool>)> done) {
  if (auto bad = check_owned(hold)) return refuse(std::move(done), std::move(*bad));
  const OwnerToken owner(hold.owner);
  auto handler =
      asio::bind_executor(AtOnce(pool_), [done = counted(std::move(done))](Result<void> released) {
        if (!released) return done(Failure{code_for(released.error()), released.error().message()});
        done(true);
      });
  const Starting starting;
  if (hold.mode == Mode::shared) return async_unlock_shared(client_, hold.name, owner, handler);
  async_unlock(client_, lock_name(hold), owner, std::move(handler));
}

void Operations::status(std::string name, std::function<void(Outcome<LockStatus>)> done) {
  if (name.empty()) {
    return refuse(std::move(done), Failure{Code::invalid_argument, "name must not be empty"});
  }
  auto handler = asio::bind_executor(
      AtOnce(pool_), [done = counted(std::move(done))](Result<LockStatus> status) {
        if (!status) return done(Failure{code_for(status.error()), status.error().message()});
        done(std::move(*status));
      });
  const Starting starting;
  async_status(client_, name, std::move(handler));
}

}  // namespace dlock::service

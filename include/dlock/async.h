// SPDX-License-Identifier: MIT
// dlock/async.h: the asio API. The same operations as Client and Lease, on the same engine,
// without a thread per lock in flight: any number of them are pipelined over the client's one
// command connection per node.
//
//   asio::awaitable<void> job(dlock::Client client) {
//     auto lease = co_await dlock::async_try_lock(client, "reports", opts, asio::use_awaitable);
//     if (!lease) co_return;  // lease.error(): lock_held, quorum_not_reached, ...
//     co_await write_report(lease->fencing_token());
//     (void)co_await dlock::async_unlock(*lease, asio::use_awaitable);
//   }
//
// Every function takes any asio completion token: a callback, asio::use_awaitable,
// asio::use_future, asio::experimental::deferred (asio 1.22, Debian 12), ... The completion
// signatures are void(Result<Lease>), void(Result<void>), void(Result<Millis>) (an extension by
// owner), void(Result<OwnerToken>) (a detach) and void(Result<LockStatus>): errors are values, as
// in the blocking API, never exceptions.
//
// Threads: the operation runs on the client's io thread (it never blocks there); the
// completion handler runs on the handler's associated executor (a coroutine's own executor
// with use_awaitable; for a plain callback without one, asio::system_executor, a thread of
// asio's pool: bind_executor picks another). Nothing of the caller's runs on the io thread.
// The handler's executor (its io_context) must outlive the operation: the completion is posted
// to it when the operation ends, however late (declare the io_context before the Client, so that
// the Client, and with it its io thread, is destroyed first).
//
// Owners: a coroutine may resume on another thread, so the default owner of the async API is
// not the thread's: without LockOptions::owner every acquisition is its own owner (nothing is
// reentrant, and renewal does not depend on a thread). For reentrancy across a task's nested
// calls, give the task an owner (LockOptions::owner, e.g. one OwnerToken per task).
//
// Cancellation (asio cancellation slots: a cancellation_signal bound with
// bind_cancellation_slot, or awaitable_operators' ||):
// the operation completes at once with errc::cancelled, and leaves nothing behind: a lock it
// took meanwhile is released (from the io thread, without waiting for it), a wait leaves its
// fair-queue place and its channel. Cancelling
// async_extend does not undo a renewal the nodes already applied (the lease stays as valid as
// the nodes say); cancelling async_unlock does not stop the release.
#pragma once

#include <dlock/client.h>
#include <dlock/lease.h>
#include <dlock/options.h>
#include <dlock/result.h>
#include <dlock/status.h>

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <asio/system_executor.hpp>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace dlock {

namespace detail {

// What a cancellation completes at once: an operation's state, held by whoever runs the
// operation. An AsyncCancel refers to it weakly and calls it without a std::function around it
// (a std::function holding a weak_ptr is an allocation, on the caller's thread, per operation).
class CancelTarget {
 public:
  // Runs on the requesting thread; it must only post or flag.
  virtual void cancel_now() = 0;

 protected:
  ~CancelTarget() = default;
};

// What an operation and its caller share: the caller's cancellation request, and the hook or
// target the operation sets to hear of it (run on the requesting thread; it must only post or
// flag).
class AsyncCancel {
 public:
  void request() {
    std::function<void()> hook;
    std::shared_ptr<CancelTarget> target;
    {
      std::lock_guard lock(mu_);
      requested_ = true;
      hook = hook_;
      target = target_.lock();
    }
    if (hook) hook();
    if (target) target->cancel_now();
  }
  bool requested() const {
    std::lock_guard lock(mu_);
    return requested_;
  }
  // Runs `hook` on every request from now on (at once if one came already).
  void on_request(std::function<void()> hook) {
    // Copied only when it must run now (rare): a copy per operation cost an allocation.
    std::function<void()> now;
    {
      std::lock_guard lock(mu_);
      if (requested_) now = hook;
      hook_ = std::move(hook);
    }
    if (now) now();
  }
  // Calls `target` (while it lives) on every request from now on (at once if one came
  // already).
  void on_request(std::weak_ptr<CancelTarget> target) {
    std::shared_ptr<CancelTarget> now;
    {
      std::lock_guard lock(mu_);
      if (requested_) now = target.lock();
      target_ = std::move(target);
    }
    if (now) now->cancel_now();
  }

 private:
  mutable std::mutex mu_;
  bool requested_ = false;
  std::function<void()> hook_;
  std::weak_ptr<CancelTarget> target_;
};

// An operation's completion: called at most once, with the outcome. Move-only, unlike a
// std::function, so that it holds the caller's handler itself: a std::function needed the
// handler behind a shared_ptr and its own allocation for the callable, two allocations per
// operation on the caller's thread, each freed on another (issue 32).
template <typename T>
class Done {
 public:
  class Impl {
   public:
    virtual ~Impl() = default;
    // Called once, with `self` owning this: an Impl may hand itself on instead of ending.
    virtual void call(std::unique_ptr<Impl> self, Result<T> result) = 0;
  };

  Done() = default;
  explicit Done(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  // Any callable (a wrapper of another Done, a test's lambda).
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Done> &&
                                                    std::is_invocable_v<F&, Result<T>>>>
  Done(F f) : impl_(std::make_unique<Fn<F>>(std::move(f))) {}  // NOLINT: implicit, as std::function

  void operator()(Result<T> result) {
    Impl* impl = impl_.get();
    impl->call(std::move(impl_), std::move(result));
  }
  explicit operator bool() const noexcept { return impl_ != nullptr; }

 private:
  template <typename F>
  class Fn final : public Impl {
   public:
    explicit Fn(F f) : f_(std::move(f)) {}
    void call(std::unique_ptr<Impl> /*self*/, Result<T> result) override { f_(std::move(result)); }

   private:
    F f_;
  };
  std::unique_ptr<Impl> impl_;
};

// The library side (src/api/async.cc): starts the operation on the client's io thread; `done`
// runs there exactly once, at once when cancelled.
// `shared`: a read hold (Client::try_lock_shared / lock_shared) instead of a write hold.
void start_try_lock(const Client& client, std::string name, LockOptions options,
                    std::shared_ptr<AsyncCancel> cancel, Done<Lease> done, bool shared = false);
void start_lock(const Client& client, std::string name, std::chrono::milliseconds wait,
                LockOptions options, std::shared_ptr<AsyncCancel> cancel, Done<Lease> done,
                bool shared = false);
// src/recipes/semaphore.cc: one permit of the semaphore `name` (Semaphore::acquire_lease).
void start_acquire_permit(const Client& client, std::string name, std::size_t permits,
                          std::chrono::milliseconds wait, LockOptions options,
                          std::shared_ptr<AsyncCancel> cancel, Done<Lease> done);
void start_unlock(Lease& lease, std::shared_ptr<AsyncCancel> cancel, Done<void> done);
// Client::unlock / unlock_shared, Client::extend / extend_shared and Client::status.
void start_unlock_owned(const Client& client, std::string name, OwnerToken owner, bool shared,
                        std::shared_ptr<AsyncCancel> cancel, Done<void> done);
void start_extend_owned(const Client& client, std::string name, OwnerToken owner,
                        std::chrono::milliseconds ttl, bool shared,
                        std::shared_ptr<AsyncCancel> cancel, Done<Millis> done);
void start_status(const Client& client, std::string name, std::shared_ptr<AsyncCancel> cancel,
                  Done<LockStatus> done);
void start_extend(Lease& lease, std::chrono::milliseconds ttl, std::shared_ptr<AsyncCancel> cancel,
                  Done<void> done);
void start_detach(Lease& lease, Done<OwnerToken> done);
std::chrono::milliseconds lease_ttl(const Lease& lease);

// A completion on its way to the caller's executor: the caller's handler with its outcome.
class HandBack {
 public:
  virtual ~HandBack() = default;
  virtual void run() = 0;
};

// The library side of a completion (src/api/async.cc): posts `completion` to `executor`, then
// drops `work`. On the client's io thread it waits there until the handler that completed it
// returns (or 16 wait), with every other completion for the same executor completed meanwhile:
// the replies of one read complete many operations, and one post for them all wakes the
// caller's thread once instead of once each (a context switch each when both threads share a
// CPU; issue 32).
// `work`: a tracked executor of the caller's context (tracked_work).
void hand_back(asio::any_io_executor executor, std::unique_ptr<HandBack> completion,
               asio::any_io_executor work);

// The executor whose work an operation keeps: a strand's inner one (the same count of work:
// a strand passes its work on). The io thread lets the work go after its last post(), and with
// it the guard's copy of the executor: a strand's last copy there would reach into its
// service after the caller's context, out of work, may have been destroyed (ThreadSanitizer:
// AsyncTest.BoundExecutorRunsTheCompletion); an io_context's executor is a pointer.
template <typename Executor>
struct WorkOf {
  using type = Executor;
  static const Executor& of(const Executor& executor) { return executor; }
};
template <typename Inner>
struct WorkOf<asio::strand<Inner>> {
  using type = Inner;
  static Inner of(const asio::strand<Inner>& strand) { return strand.get_inner_executor(); }
};
// The work that keeps `executor`'s context running until the completion is handed back
// (hand_back): a type-erased tracked executor (a coroutine's executor with use_awaitable, any
// bind_executor(any_io_executor, ...)), held by value in the operation's completion, not behind
// a shared_ptr of its own (an allocation per operation on the caller's thread, freed on the io
// thread). One tracked copy, not executor_work_guard's two (its untracked copy outlived the
// tracked one, so a strand behind it was let go on the io thread after the work had ended:
// ThreadSanitizer, a coroutine on a strand, found by review); a strand then lets its
// implementation go before its inner executor ends the work (asio::strand's members, destroyed
// in reverse order).
template <typename Executor>
asio::any_io_executor tracked_work(const Executor& executor) {
  return asio::prefer(WorkOf<Executor>::of(executor), asio::execution::outstanding_work.tracked);
}
// The work of a completion posted at once (asio's system pool, executors of other kinds).
template <typename Executor>
auto make_work(const Executor& executor) {
  using Work = asio::executor_work_guard<typename WorkOf<Executor>::type>;
  return std::make_shared<Work>(WorkOf<Executor>::of(executor));
}

// An operation's completion (a Done) that becomes, once called, the HandBack that runs the
// caller's handler with the outcome: one allocation for the handler, its executor, its work
// and its outcome. `batched`: handed back through hand_back (an io_context, a strand), else
// posted at once (asio's system pool, other executors).
template <typename T, typename Handler, typename Executor, typename Work, bool batched>
class HandingBack final : public Done<T>::Impl, public HandBack {
 public:
  HandingBack(Handler handler, Executor executor, Work work)
      : work_(std::move(work)), handler_(std::move(handler)), executor_(std::move(executor)) {}

  void call(std::unique_ptr<typename Done<T>::Impl> self, Result<T> result) override {
    result_.emplace(std::move(result));
    // Nothing of this is touched once it is posted: it may run, and end, on another thread
    // at once. The executor moves along: no copy of it stays here, which may outlive the work
    // (a full batch is handed back inside this call).
    auto executor = std::move(executor_);
    auto work = std::move(work_);
    std::unique_ptr<HandBack> completion(this);
    (void)self.release();  // owned by `completion` from here on
    if constexpr (batched) {
      hand_back(std::move(executor), std::move(completion), std::move(work));
    } else {
      post_at_once(std::move(executor), std::move(completion));
      // Only after post() returned: it still wakes one of the executor's threads after the
      // handler can run there. Were the work released by the handler, its io_context could run
      // out of work, return from run() and be destroyed by its owner while post() is still
      // signalling it (ThreadSanitizer saw exactly that in AsyncTest.ManyInFlightFromOneThread).
      // The executor is gone by now too: its last copy must not outlive the work either.
      work->reset();
    }
  }
  // Takes the executor by value: its copy ends with this call, before the caller lets the
  // work go (as hand_back does with its own).
  static void post_at_once(Executor executor, std::unique_ptr<HandBack> completion) {
    asio::post(executor, [completion = std::move(completion)] { completion->run(); });
  }
  void run() override {
    // The slot is left as it is: a late emit finds the operation over and does nothing,
    // while clearing it here could race an emit on another thread.
    // Taken out first: the user's handler (and what it captured) ends here, on its
    // executor, not later with this object.
    auto to_call = std::move(handler_);
    std::move(to_call)(std::move(*result_));
  }

 private:
  // In this order: destroyed uncalled (the io thread ending with the operation), the handler
  // and the executor go before the work, as in Pending::flush (src/api/async.cc).
  Work work_;
  Handler handler_;
  Executor executor_;
  std::optional<Result<T>> result_;
};

// Adapts a completion handler: hooks its cancellation slot to an AsyncCancel, keeps its
// executor busy while the operation runs, and completes on that executor.
template <typename T, typename Handler, typename Start>
void initiate(Handler handler, Start start) {
  auto cancel = std::make_shared<AsyncCancel>();
  auto slot = asio::get_associated_cancellation_slot(handler);
  if (slot.is_connected()) {
    slot.assign([cancel](asio::cancellation_type type) {
      if (type != asio::cancellation_type::none) cancel->request();
    });
  }
  auto executor = asio::get_associated_executor(handler, asio::system_executor());
  using Executor = decltype(executor);
  if constexpr (std::is_same_v<Executor, asio::system_executor> ||
                !std::is_convertible_v<Executor, asio::any_io_executor>) {
    // asio starts the system executor's threads when it is first used: here, on the caller's
    // thread, so they get its signal mask, not that of the client's io thread, which blocks
    // every asynchronous signal (a handler's child process would inherit that). Executors of
    // other kinds may post there too: use_future's promise executor does
    // (AsyncSignalTest.CallbacksRunWithTheCallersMaskAfterAFutureCameFirst).
    (void)asio::system_executor().context();
  }
  // Batched where one thread runs the handlers in turn anyway (an io_context, a strand), not on
  // asio's system pool: a batch runs its handlers one after another, and a plain callback that
  // blocks until another operation's callback has run (a promise) must not wait behind it.
  constexpr bool batched = std::is_convertible_v<Executor, asio::any_io_executor> &&
                           !std::is_same_v<Executor, asio::system_executor>;
  auto start_with = [&](auto work) {
    using Impl = HandingBack<T, Handler, Executor, decltype(work), batched>;
    start(cancel, Done<T>(std::unique_ptr<typename Done<T>::Impl>(std::make_unique<Impl>(
                      std::move(handler), std::move(executor), std::move(work)))));
  };
  if constexpr (batched) {
    start_with(tracked_work(executor));
  } else {
    start_with(make_work(executor));
  }
}

}  // namespace detail

// Client::try_lock: one attempt. Completes with Result<Lease>.
template <typename Token>
auto async_try_lock(Client& client, std::string_view name, LockOptions options, Token&& token) {
  return asio::async_initiate<Token, void(Result<Lease>)>(
      [client](auto handler, std::string n, LockOptions o) {
        detail::initiate<Lease>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_try_lock(client, std::move(n), std::move(o), std::move(cancel),
                                 std::move(done));
        });
      },
      token, std::string(name), std::move(options));
}

// Client::lock: waits up to `wait` for a lock held by someone else (woken by release messages,
// no polling; with options.fair, in arrival order). Completes with Result<Lease>; errors as
// async_try_lock, with errc::wait_timeout instead of lock_held.
template <typename Token>
auto async_lock(Client& client, std::string_view name, Millis wait, LockOptions options,
                Token&& token) {
  return asio::async_initiate<Token, void(Result<Lease>)>(
      [client, wait](auto handler, std::string n, LockOptions o) {
        detail::initiate<Lease>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_lock(client, std::move(n), wait, std::move(o), std::move(cancel),
                             std::move(done));
        });
      },
      token, std::string(name), std::move(options));
}

// Client::try_lock_shared: one attempt at a read hold. Completes with Result<Lease>.
template <typename Token>
auto async_try_lock_shared(Client& client, std::string_view name, LockOptions options,
                           Token&& token) {
  return asio::async_initiate<Token, void(Result<Lease>)>(
      [client](auto handler, std::string n, LockOptions o) {
        detail::initiate<Lease>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_try_lock(client, std::move(n), std::move(o), std::move(cancel),
                                 std::move(done), /*shared=*/true);
        });
      },
      token, std::string(name), std::move(options));
}

// Client::lock_shared: waits up to `wait` for a read hold. Completes with Result<Lease>;
// errors as async_lock.
template <typename Token>
auto async_lock_shared(Client& client, std::string_view name, Millis wait, LockOptions options,
                       Token&& token) {
  return asio::async_initiate<Token, void(Result<Lease>)>(
      [client, wait](auto handler, std::string n, LockOptions o) {
        detail::initiate<Lease>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_lock(client, std::move(n), wait, std::move(o), std::move(cancel),
                             std::move(done), /*shared=*/true);
        });
      },
      token, std::string(name), std::move(options));
}

// Semaphore(client, name, permits, options).acquire_lease(wait): one of `permits` permits of
// the semaphore `name`, waiting up to `wait` (0: one pass over the permits). The lease's name()
// is the permit's slot (Semaphore::slot_name). Completes with Result<Lease>; errors as
// Semaphore::acquire_lease (lock_held for a pass, wait_timeout for a wait, invalid_argument for
// another permit count than the nodes recorded).
template <typename Token>
auto async_acquire_permit(Client& client, std::string_view name, std::size_t permits, Millis wait,
                          LockOptions options, Token&& token) {
  return asio::async_initiate<Token, void(Result<Lease>)>(
      [client, permits, wait](auto handler, std::string n, LockOptions o) {
        detail::initiate<Lease>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_acquire_permit(client, std::move(n), permits, wait, std::move(o),
                                       std::move(cancel), std::move(done));
        });
      },
      token, std::string(name), std::move(options));
}

// Lease::unlock. The lease must outlive the operation. Completes with Result<void>.
template <typename Token>
auto async_unlock(Lease& lease, Token&& token) {
  return asio::async_initiate<Token, void(Result<void>)>(
      [&lease](auto handler) {
        detail::initiate<void>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_unlock(lease, std::move(cancel), std::move(done));
        });
      },
      token);
}

// Lease::extend(ttl). The lease must outlive the operation. Completes with Result<void>.
template <typename Token>
auto async_extend(Lease& lease, Millis ttl, Token&& token) {
  return asio::async_initiate<Token, void(Result<void>)>(
      [&lease, ttl](auto handler) {
        detail::initiate<void>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_extend(lease, ttl, std::move(cancel), std::move(done));
        });
      },
      token);
}

// Lease::detach: hands the hold over to whoever gets the owner (it is released or extended by
// name and owner from then on: async_unlock / async_extend above, through any client). The
// lease is empty from the call on; the operation completes with Result<OwnerToken> once this
// client has forgotten the hold. Errors as Lease::detach (not_owner for a released lease,
// lock_lost for a lost or expired one). Not cancellable: the owner is all that is left of the
// hold.
template <typename Token>
auto async_detach(Lease& lease, Token&& token) {
  return asio::async_initiate<Token, void(Result<OwnerToken>)>(
      [&lease](auto handler) {
        detail::initiate<OwnerToken>(std::move(handler), [&](auto /*cancel*/, auto done) {
          detail::start_detach(lease, std::move(done));
        });
      },
      token);
}

// Lease::extend() with the lease's own ttl.
template <typename Token>
auto async_extend(Lease& lease, Token&& token) {
  return async_extend(lease, detail::lease_ttl(lease), std::forward<Token>(token));
}

// Client::unlock(name, owner): one write hold of `name` by `owner`, released by the owner's name
// (a lock handed over across threads or processes: Lease::detach). Completes with
// Result<void>; errors as Client::unlock. Cancelling does not stop the release.
template <typename Token>
auto async_unlock(Client& client, std::string_view name, const OwnerToken& owner, Token&& token) {
  return asio::async_initiate<Token, void(Result<void>)>(
      [client](auto handler, std::string n, OwnerToken o) {
        detail::initiate<void>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_unlock_owned(client, std::move(n), std::move(o), /*shared=*/false,
                                     std::move(cancel), std::move(done));
        });
      },
      token, std::string(name), owner);
}

// Client::unlock_shared(name, owner): the same for `owner`'s read hold.
template <typename Token>
auto async_unlock_shared(Client& client, std::string_view name, const OwnerToken& owner,
                         Token&& token) {
  return asio::async_initiate<Token, void(Result<void>)>(
      [client](auto handler, std::string n, OwnerToken o) {
        detail::initiate<void>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_unlock_owned(client, std::move(n), std::move(o), /*shared=*/true,
                                     std::move(cancel), std::move(done));
        });
      },
      token, std::string(name), owner);
}

// Client::extend(name, owner, ttl): re-arms `owner`'s write hold of `name`. Completes with
// Result<Millis>, the validity it now has; errors as Client::extend. Cancelling does not undo a
// renewal the nodes already applied.
template <typename Token>
auto async_extend(Client& client, std::string_view name, const OwnerToken& owner, Millis ttl,
                  Token&& token) {
  return asio::async_initiate<Token, void(Result<Millis>)>(
      [client, ttl](auto handler, std::string n, OwnerToken o) {
        detail::initiate<Millis>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_extend_owned(client, std::move(n), std::move(o), ttl, /*shared=*/false,
                                     std::move(cancel), std::move(done));
        });
      },
      token, std::string(name), owner);
}

// Client::extend_shared(name, owner, ttl): the same for `owner`'s read hold.
template <typename Token>
auto async_extend_shared(Client& client, std::string_view name, const OwnerToken& owner, Millis ttl,
                         Token&& token) {
  return asio::async_initiate<Token, void(Result<Millis>)>(
      [client, ttl](auto handler, std::string n, OwnerToken o) {
        detail::initiate<Millis>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_extend_owned(client, std::move(n), std::move(o), ttl, /*shared=*/true,
                                     std::move(cancel), std::move(done));
        });
      },
      token, std::string(name), owner);
}

// Client::status(name): what each node knows about `name`. Completes with Result<LockStatus>.
template <typename Token>
auto async_status(Client& client, std::string_view name, Token&& token) {
  return asio::async_initiate<Token, void(Result<LockStatus>)>(
      [client](auto handler, std::string n) {
        detail::initiate<LockStatus>(std::move(handler), [&](auto cancel, auto done) {
          detail::start_status(client, std::move(n), std::move(cancel), std::move(done));
        });
      },
      token, std::string(name));
}

}  // namespace dlock

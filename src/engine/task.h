// SPDX-License-Identifier: MIT
// Task<T>: the coroutine type of dlock's one engine. Every lock operation (acquire, release,
// extend, the greeting of Membership) is written once as a Task; the blocking API and the asio
// API only differ in how they start it and wait for it (engine/run.h).
//
// A Task is lazy (it runs when awaited or started) and resumes whoever awaited it when it ends.
// A Task that finishes inline hands control back by returning from its resumption, not by
// resuming its awaiter from inside its final suspension: a loop of such Tasks then runs in
// constant stack at any optimisation level (symmetric transfer is a tail call only where the
// compiler makes it one; GCC 12 at -O1 did not, and a long wait overflowed the stack under
// ASan: tests/unit/task_test.cc). A Task runs on the thread that
// resumes it: the thread that started it until its first real suspension (a round that could
// not complete inline), then the engine's io thread. It never throws: errors are values.
//
// A rule for Task code (GCC 12 mishandles temporaries that live across a suspension: it
// destroyed a std::string made by `cond ? s : ""` twice): no temporary in a co_await
// expression. Make the awaited Task or awaitable a named local first:
//   auto releasing = release_task(hold);
//   auto released = co_await std::move(releasing);
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdlib>
#include <exception>
#include <optional>
#include <utility>

#include "engine/frame_pool.h"

namespace dlock::engine {

template <typename T>
class Task {
 public:
  struct promise_type {
    std::optional<T> value;
    std::coroutine_handle<> continuation;
    // Set by whichever comes second of "the awaiter suspended" and "the task finished": the
    // second one resumes the awaiter (the task's end by transfer, the awaiter by not suspending).
    std::atomic<bool> one_side_done{false};

    // Frames from the thread's pool (engine/frame_pool.h), not one malloc and free each.
    static void* operator new(std::size_t size) { return detail::allocate_frame(size); }
    static void operator delete(void* frame, std::size_t size) noexcept {
      detail::free_frame(frame, size);
    }

    Task get_return_object() noexcept {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        auto& p = h.promise();
        // Finished before the awaiter suspended (inline): its await_suspend goes on by itself.
        if (!p.one_side_done.exchange(true, std::memory_order_acq_rel)) {
          return std::noop_coroutine();
        }
        return p.continuation ? p.continuation : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    template <typename U>
    void return_value(U&& v) {
      value.emplace(std::forward<U>(v));
    }
    // dlock reports errors as values; an exception here is a bug.
    void unhandled_exception() noexcept { std::terminate(); }
  };

  Task(Task&& other) noexcept : h_(std::exchange(other.h_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      if (h_) h_.destroy();
      h_ = std::exchange(other.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  // co_await task: runs it, and resumes the awaiting coroutine with its value: at once if it
  // finished inline (false: not suspended), else from its end, wherever that runs.
  bool await_ready() const noexcept { return false; }
  bool await_suspend(std::coroutine_handle<> awaiting) noexcept {
    h_.promise().continuation = awaiting;
    h_.resume();
    return !h_.promise().one_side_done.exchange(true, std::memory_order_acq_rel);
  }
  T await_resume() { return std::move(*h_.promise().value); }

 private:
  explicit Task(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}
  std::coroutine_handle<promise_type> h_;
};

// co_await Quick(fast, later): `fast`'s value if it has one, with no coroutine frame at all;
// else the Task `later()` makes, awaited as any. For a step of the lock cycle that nearly
// always completes at once (an uncontended mutex, nothing to send): each Task frame costs a
// pool round trip and a suspension protocol (issue 32). `fast` is decided when the Quick is
// made, so make it right where it is awaited.
template <typename T, typename Later>
class Quick {
 public:
  Quick(std::optional<T> fast, Later later) : fast_(std::move(fast)), later_(std::move(later)) {}
  bool await_ready() const noexcept { return fast_.has_value(); }
  bool await_suspend(std::coroutine_handle<> awaiting) {
    task_.emplace(later_());
    return task_->await_suspend(awaiting);
  }
  T await_resume() { return fast_ ? std::move(*fast_) : task_->await_resume(); }

 private:
  std::optional<T> fast_;
  Later later_;
  std::optional<Task<T>> task_;
};

namespace detail {

// The frame of a started task: begins at once and frees itself at the end.
struct Detached {
  struct promise_type {
    static void* operator new(std::size_t size) { return allocate_frame(size); }
    static void operator delete(void* frame, std::size_t size) noexcept { free_frame(frame, size); }
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

// The task's frame (and what its parameters hold: the client's core) is destroyed before
// `done` runs. A blocking caller wakes in `done` and may drop the last reference to the client
// at once; the frame must not drop it after that on the io thread, which would have to end the
// client on another thread while the process exits (tests/unit/task_test.cc).
template <typename T, typename Done>
Detached run_detached(Task<T> task, Done done) {
  std::optional<T> value;
  {
    Task<T> owned = std::move(task);
    value.emplace(co_await std::move(owned));
  }
  done(std::move(*value));
}

}  // namespace detail

// Runs `task` now, on this thread, until it first suspends; `done(T)` runs once with its value,
// on whichever thread finishes it (inline, before start() returns, if it never suspends).
template <typename T, typename Done>
void start(Task<T> task, Done done) {
  detail::run_detached(std::move(task), std::move(done));
}

}  // namespace dlock::engine

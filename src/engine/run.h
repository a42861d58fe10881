// SPDX-License-Identifier: MIT
// How the blocking API runs a Task: start it on the calling thread and wait for its value. A
// round that can be done on the calling thread is (node/borrowed_run.h); otherwise the task
// suspends, the io thread finishes it, and this thread wakes once, at the end.
//
// Never on an io thread: it would wait for itself (engine::on_io_thread()).
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/task.h"
#include "engine/thread_role.h"

namespace dlock::engine {

template <typename T>
T run_sync(Task<T> task) {
  // On this thread's stack, not shared: this frame waits below until `done` has run, and
  // `done` touches it last under the mutex, which the waiter takes again before it returns.
  struct Waiting {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<T> value;
    const std::thread::id caller = std::this_thread::get_id();
    bool done_inline = false;  // this thread's only: `done` ran before start() returned
  } w;
  start(std::move(task), [&w](T v) {
    if (std::this_thread::get_id() == w.caller) {
      // This thread only runs `done` inside start() (after it, it waits): nobody waits yet,
      // and nothing else touches `w` (the fast path's usual case: no lock, no wake-up).
      w.value.emplace(std::move(v));
      w.done_inline = true;
      return;
    }
    std::lock_guard lock(w.mu);
    w.value.emplace(std::move(v));
    w.cv.notify_one();
  });
  if (w.done_inline) return std::move(*w.value);
  std::unique_lock lock(w.mu);
  w.cv.wait(lock, [&] { return w.value.has_value(); });
  return std::move(*w.value);
}

}  // namespace dlock::engine

// SPDX-License-Identifier: MIT
// How the blocking API runs a Task: start it on the calling thread and wait for its value. A
// round that can be done on the calling thread is (node/borrowed_run.h); otherwise the task
// suspends, the io thread finishes it, and this thread wakes once, at the end.
//
// Never on an io thread: it would wait for itself (engine::on_io_thread()).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/task.h"
#include "engine/thread_role.h"

namespace dlock::engine {

template <typename T>
T run_sync(Task<T> task) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<T> value;
  };
  auto shared = std::make_shared<Shared>();
  start(std::move(task), [shared](T v) {
    std::lock_guard lock(shared->mu);
    shared->value.emplace(std::move(v));
    shared->cv.notify_one();
  });
  std::unique_lock lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->value.has_value(); });
  return std::move(*shared->value);
}

}  // namespace dlock::engine

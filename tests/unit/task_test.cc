// SPDX-License-Identifier: MIT
// The engine's Task and start(): what the blocking API and the asio API rely on.
#include "engine/task.h"

#include <gtest/gtest.h>

#include <coroutine>
#include <memory>
#include <optional>

#include "engine/run.h"

namespace dlock::engine {
namespace {

// Suspends the awaiting Task until the test resumes it (as a round finished by the io thread).
struct Gate {
  std::coroutine_handle<> waiting;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) noexcept { waiting = h; }
  void await_resume() const noexcept {}
};

// `held` stands for what a Task's parameters keep alive (the client's core).
Task<int> suspends_once(std::shared_ptr<int> held, Gate& gate) {
  co_await gate;
  co_return *held + 1;
}

Task<int> never_suspends(std::shared_ptr<int> held) {
  co_return *held + 1;
}

// Issue 13's regression: a started Task's frame, and every reference its parameters hold, is
// gone before its completion runs. run_sync's caller wakes in that completion and may drop the
// last Client right away; were the frame destroyed after it, on the io thread, that thread would
// drop the client's last reference while main() returns (a `dlock run` under ASan crashed on
// the error category destroyed at exit).
TEST(TaskTest, FrameIsGoneBeforeTheCompletionRunsWhenFinishedElsewhere) {
  auto held = std::make_shared<int>(41);
  std::weak_ptr<int> watch = held;
  Gate gate;
  std::optional<long> uses_in_done;
  std::optional<int> value;
  start(suspends_once(std::move(held), gate), [&](int v) {
    value = v;
    uses_in_done = watch.use_count();
  });
  ASSERT_FALSE(value.has_value());
  ASSERT_TRUE(gate.waiting);
  gate.waiting.resume();  // the "io thread" finishes it
  ASSERT_EQ(value, 42);
  EXPECT_EQ(uses_in_done, 0) << "the task's frame still held its parameters in the completion";
}

TEST(TaskTest, FrameIsGoneBeforeTheCompletionRunsWhenFinishedInline) {
  auto held = std::make_shared<int>(1);
  std::weak_ptr<int> watch = held;
  std::optional<long> uses_in_done;
  start(never_suspends(std::move(held)), [&](int v) {
    EXPECT_EQ(v, 2);
    uses_in_done = watch.use_count();
  });
  EXPECT_EQ(uses_in_done, 0);
}

TEST(TaskTest, RunSyncReturnsTheValue) {
  EXPECT_EQ(run_sync(never_suspends(std::make_shared<int>(6))), 7);
}

}  // namespace
}  // namespace dlock::engine

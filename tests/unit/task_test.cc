// SPDX-License-Identifier: MIT
// The engine's Task and start(): what the blocking API and the asio API rely on.
#include "engine/task.h"

#include <gtest/gtest.h>

#include <coroutine>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "engine/frame_pool.h"
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

// The current depth of the machine stack. Not the address of a local of a coroutine: that
// lives in the coroutine's frame, on the heap.
[[gnu::noinline]] std::uintptr_t stack_depth_marker() {
  return reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
}

// Where the innermost Task of a loop's iteration runs.
Task<std::uintptr_t> stack_here() {
  co_return stack_depth_marker();
}

Task<std::uintptr_t> one_step() {
  auto inner = stack_here();
  co_return co_await std::move(inner);
}

// Awaits `steps` Tasks that all finish inline, one after another, as a wait on the caller's
// thread does (lock/wait.cc: attempt, nap, attempt, ...): how far the stack moved from the first
// step to the last.
Task<std::ptrdiff_t> loop_of_inline_steps(int steps) {
  std::uintptr_t first = 0;
  std::uintptr_t last = 0;
  for (int i = 0; i < steps; ++i) {
    auto step = one_step();
    last = co_await std::move(step);
    if (i == 0) first = last;
  }
  co_return static_cast<std::ptrdiff_t>(first) - static_cast<std::ptrdiff_t>(last);
}

// A loop of Tasks that finish inline runs in constant stack. Resuming the awaiter by symmetric
// transfer is a tail call only when the compiler makes it one: GCC 12 at -O1 (the sanitizer
// builds) did not, every finished Task resumed its awaiter one frame deeper, and a wait that
// retried for seconds on the caller's thread overflowed the stack under ASan
// (ClusterReshardTest.*, a fresh node's quarantine retried every 100 ms).
TEST(TaskTest, ALoopOfTasksThatFinishInlineRunsInConstantStack) {
  constexpr int kSteps = 200000;
  const std::ptrdiff_t moved = run_sync(loop_of_inline_steps(kSteps));
  EXPECT_LT(std::abs(moved), 64 * 1024)
      << "the stack grew by " << moved << " bytes over " << kSteps << " steps";
}

// The same where some steps suspend and are finished by another party (the io thread): the
// completion resumes the loop, which goes on inline from there.
TEST(TaskTest, ALoopMixingSuspendedAndInlineStepsGetsEveryValue) {
  Gate gate;
  auto held = std::make_shared<int>(0);
  std::optional<int> total;
  auto loop = [](std::shared_ptr<int> h, Gate& g) -> Task<int> {
    int sum = 0;
    for (int i = 0; i < 1000; ++i) {
      if (i % 100 == 0) {
        auto step = suspends_once(h, g);
        sum += co_await std::move(step);
      } else {
        auto step = never_suspends(h);
        sum += co_await std::move(step);
      }
    }
    co_return sum;
  };
  start(loop(held, gate), [&](int v) { total = v; });
  for (int resumed = 0; resumed < 10; ++resumed) {
    ASSERT_FALSE(total.has_value());
    ASSERT_TRUE(gate.waiting);
    auto h = std::exchange(gate.waiting, {});
    h.resume();
  }
  EXPECT_EQ(total, 1000);
}

// Under AddressSanitizer the pool hands every frame to the heap (a frame used after its Task
// ended must still be reported): which address comes back is then the heap's business.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif

TEST(FramePool, AFreedFrameIsReusedForOneOfTheSameSizeClass) {
  void* a = detail::allocate_frame(200);
  detail::free_frame(a, 200);
  void* b = detail::allocate_frame(250);  // rounded up to the same class (193 to 256 bytes)
  if (kPooled) {
    EXPECT_EQ(a, b);
  }
  std::memset(b, 0x5a, 250);
  detail::free_frame(b, 250);
}

TEST(FramePool, FramesInUseNeverOverlapHoweverManyAndLarge) {
  // More than a class keeps, and sizes past the largest class (served by the heap).
  for (const std::size_t size : {40UL, 300UL, 1984UL, 1985UL, 9000UL}) {
    std::vector<unsigned char*> frames;
    for (int round = 0; round < 2; ++round) {
      for (int i = 0; i < 40; ++i) {
        frames.push_back(static_cast<unsigned char*>(detail::allocate_frame(size)));
        std::memset(frames.back(), i, size);
      }
      for (int i = 0; i < 40; ++i) {
        EXPECT_EQ(frames[i][0], i);
        EXPECT_EQ(frames[i][size - 1], i);
      }
      for (auto* f : frames) detail::free_frame(f, size);
      frames.clear();
    }
  }
}

TEST(FramePool, AFrameFreedOnAnotherThreadServesThatThread) {
  void* a = detail::allocate_frame(500);
  std::thread([a] {
    detail::free_frame(a, 500);
    void* b = detail::allocate_frame(500);
    if (kPooled) {
      EXPECT_EQ(a, b);
    }
    detail::free_frame(b, 500);
  }).join();  // the thread's pool goes back to the heap as it exits (LeakSanitizer checks)
}

}  // namespace
}  // namespace dlock::engine

// SPDX-License-Identifier: MIT
#include "lock/lease_state.h"

namespace dlock::detail {
namespace {

struct ThreadLife {
  ThreadLife() : alive(std::make_shared<std::atomic<bool>>(true)) {}
  ~ThreadLife() { alive->store(false); }
  ThreadLife(const ThreadLife&) = delete;
  ThreadLife& operator=(const ThreadLife&) = delete;
  std::shared_ptr<std::atomic<bool>> alive;
};

}  // namespace

std::shared_ptr<const std::atomic<bool>> this_thread_alive() {
  thread_local ThreadLife life;
  return life.alive;
}

}  // namespace dlock::detail

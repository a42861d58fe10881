// SPDX-License-Identifier: MIT
#include "engine/thread_role.h"

namespace dlock::engine {
namespace {
thread_local bool io_thread = false;
thread_local asio::io_context* io_thread_io = nullptr;
thread_local bool watchdog_thread = false;
}  // namespace

bool on_io_thread() noexcept {
  return io_thread;
}

void become_io_thread(asio::io_context& io) noexcept {
  io_thread = true;
  io_thread_io = &io;
}

asio::io_context* io_thread_context() noexcept {
  return io_thread_io;
}

bool on_client_thread() noexcept {
  return io_thread || watchdog_thread;
}

void become_watchdog_thread() noexcept {
  watchdog_thread = true;
}

}  // namespace dlock::engine

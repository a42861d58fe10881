// SPDX-License-Identifier: MIT
// Which threads are dlock io threads. An io thread must never block: it does not borrow
// sockets (node/borrowed_run.h) and never waits for a Task (engine/run.h).
#pragma once

namespace dlock::engine {

// True on a thread that runs an io_context of dlock's (NodeSet's thread).
bool on_io_thread() noexcept;
// Marks the calling thread as an io thread (for its lifetime).
void become_io_thread() noexcept;

// True on a client's own threads (io or watchdog), which a client cannot be destroyed on: its
// destructor joins them.
bool on_client_thread() noexcept;
// Marks the calling thread as a watchdog thread (for its lifetime).
void become_watchdog_thread() noexcept;

}  // namespace dlock::engine

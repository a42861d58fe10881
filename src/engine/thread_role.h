// SPDX-License-Identifier: MIT
// Which threads are dlock io threads. An io thread must never block: it does not borrow
// sockets (node/borrowed_run.h) and never waits for a Task (engine/run.h).
#pragma once

namespace asio {
class io_context;
}  // namespace asio

namespace dlock::engine {

// True on a thread that runs an io_context of dlock's (NodeSet's thread).
bool on_io_thread() noexcept;
// Marks the calling thread as an io thread (for its lifetime), which runs `io`.
void become_io_thread(asio::io_context& io) noexcept;
// The io_context the calling io thread runs (null on any other thread): what runs there may
// post to it, to run something after the handlers already queued.
asio::io_context* io_thread_context() noexcept;

// True on a client's own threads (io or watchdog), which a client cannot be destroyed on: its
// destructor joins them.
bool on_client_thread() noexcept;
// Marks the calling thread as a watchdog thread (for its lifetime).
void become_watchdog_thread() noexcept;

}  // namespace dlock::engine

// SPDX-License-Identifier: MIT
// Owner tokens and random values from the OS CSPRNG.
#pragma once

#include <dlock/types.h>

#include <cstddef>
#include <string>

namespace dlock::lock {

// `bytes` random bytes from getrandom(2), as lower-case hex.
std::string random_hex(std::size_t bytes);

// This process's 128-bit random id, made anew in a forked child.
std::string process_id();

// process_id() + ":" + the calling thread's kernel id.
OwnerToken thread_owner();

// process_id() + ":task-" + a number never used before in this process: the default owner of
// an asio operation (a coroutine is not bound to a thread).
OwnerToken task_owner();

}  // namespace dlock::lock

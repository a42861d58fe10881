// SPDX-License-Identifier: MIT
// Recycled coroutine frames for Task (engine/task.h). A lock cycle starts about a dozen Tasks
// (attempt, holds, membership, quorum, release, their mutex waits) and each frame was one
// malloc and one free; the frames of a cycle come in a few sizes that repeat, so each thread
// keeps a short list of freed frames per size class and takes from it first (issue 32).
//
// Per thread: a frame may be freed on another thread than the one that made it (a Task that
// went on on the io thread); it then joins that thread's list. A thread keeps at most 256 KiB
// of frames in all its lists (size classes of 64 bytes up to 1984; larger frames always use the
// heap), so memory that moves from thread to thread stays bounded; a thread's frames go back to the
// heap when it exits. Under AddressSanitizer the pool is bypassed, so a frame used after its Task
// ended is still reported as a use after free.
#pragma once

#include <cstddef>

namespace dlock::engine::detail {

void* allocate_frame(std::size_t size);
void free_frame(void* frame, std::size_t size) noexcept;

}  // namespace dlock::engine::detail

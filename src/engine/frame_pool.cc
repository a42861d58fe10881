// SPDX-License-Identifier: MIT
#include "engine/frame_pool.h"

#include <array>
#include <new>

namespace dlock::engine::detail {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPooled = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kPooled = false;
#else
constexpr bool kPooled = true;
#endif
#else
constexpr bool kPooled = true;
#endif

// Size classes of 64 bytes up to 2 KiB; larger frames (none on the lock path) use the heap.
constexpr std::size_t kGranule = 64;
constexpr std::size_t kClasses = 32;
// What a thread keeps, in bytes, over all its classes. A cycle's frames are alive together for
// every lock operation in flight, and a read's replies end up to all of them at once: 16
// frames a class (the bound before) let most of them go back to the heap at 64 in flight, and
// a thread's next operations then took them from the heap again, 6.4 mallocs a cycle (a
// frame's malloc and free cost about 500 instructions; issue 32). 256 KiB holds the frames of
// about 128 cycles in flight (about 2 KiB a cycle).
constexpr std::size_t kKeepBytes = 256 * 1024;

struct Free {
  Free* next;
};

// The thread's lists: constant-initialised and trivially destroyed, so that reaching them is
// one thread-local address. A thread_local with a destructor is reached through a wrapper that
// checks its initialisation guard at every use, twice per frame (about 150 instructions a lock
// cycle, issue 32). Emptied at thread exit by a Releaser (below).
struct Lists {
  std::array<Free*, kClasses> heads;
  std::size_t kept_bytes;  // in every list together
  bool closed;             // the thread is exiting: every frame goes to the heap
  bool releases;           // this thread's Releaser is registered
};
thread_local constinit Lists lists{};

// At thread exit: the kept frames go back to the heap. A frame freed after this (a static
// object's, at process exit) goes to the heap too: `closed` keeps every list full.
struct Releaser {
  Releaser() = default;
  Releaser(const Releaser&) = delete;
  Releaser& operator=(const Releaser&) = delete;
  ~Releaser() {
    Lists& l = lists;
    l.closed = true;
    for (auto& head : l.heads) {
      while (head != nullptr) {
        Free* next = head->next;
        ::operator delete(head);
        head = next;
      }
    }
  }
};

// Once per thread, before it keeps its first frame.
void register_releaser() {
  thread_local Releaser releaser;
  (void)releaser;
  lists.releases = true;
}

void* take(std::size_t c) {
  Lists& l = lists;
  Free* f = l.heads[c];
  if (f == nullptr) return nullptr;
  l.heads[c] = f->next;
  l.kept_bytes -= c * kGranule;
  return f;
}

bool keep(std::size_t c, void* frame) {
  Lists& l = lists;
  if (l.closed || l.kept_bytes + c * kGranule > kKeepBytes) return false;
  if (!l.releases) register_releaser();
  l.heads[c] = new (frame) Free{l.heads[c]};
  l.kept_bytes += c * kGranule;
  return true;
}

// The class of a frame of `size` bytes (kClasses or more: not pooled).
constexpr std::size_t size_class(std::size_t size) {
  return (size + kGranule - 1) / kGranule;
}

}  // namespace

void* allocate_frame(std::size_t size) {
  const std::size_t c = size_class(size);
  if (!kPooled || c >= kClasses) return ::operator new(size);
  if (void* frame = take(c)) return frame;
  return ::operator new(c* kGranule);
}

void free_frame(void* frame, std::size_t size) noexcept {
  const std::size_t c = size_class(size);
  if (!kPooled || c >= kClasses || !keep(c, frame)) ::operator delete(frame);
}

}  // namespace dlock::engine::detail

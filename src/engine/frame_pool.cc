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
constexpr std::size_t kKeep = 16;

struct Free {
  Free* next;
};

class Lists {
 public:
  Lists() = default;
  Lists(const Lists&) = delete;
  Lists& operator=(const Lists&) = delete;
  // At thread exit. A frame freed after this (a static object's, at process exit) goes to the
  // heap: `closed_` keeps every list full.
  ~Lists() {
    closed_ = true;
    for (auto& head : heads_) {
      while (head != nullptr) {
        Free* next = head->next;
        ::operator delete(head);
        head = next;
      }
    }
  }
  void* take(std::size_t c) {
    Free* f = heads_[c];
    if (f == nullptr) return nullptr;
    heads_[c] = f->next;
    --counts_[c];
    return f;
  }
  bool keep(std::size_t c, void* frame) {
    if (closed_ || counts_[c] == kKeep) return false;
    heads_[c] = new (frame) Free{heads_[c]};
    ++counts_[c];
    return true;
  }

 private:
  std::array<Free*, kClasses> heads_{};
  std::array<std::size_t, kClasses> counts_{};
  bool closed_ = false;
};

Lists& lists() {
  thread_local Lists l;
  return l;
}

// The class of a frame of `size` bytes (kClasses or more: not pooled).
constexpr std::size_t size_class(std::size_t size) {
  return (size + kGranule - 1) / kGranule;
}

}  // namespace

void* allocate_frame(std::size_t size) {
  const std::size_t c = size_class(size);
  if (!kPooled || c >= kClasses) return ::operator new(size);
  if (void* frame = lists().take(c)) return frame;
  return ::operator new(c* kGranule);
}

void free_frame(void* frame, std::size_t size) noexcept {
  const std::size_t c = size_class(size);
  if (!kPooled || c >= kClasses || !lists().keep(c, frame)) ::operator delete(frame);
}

}  // namespace dlock::engine::detail

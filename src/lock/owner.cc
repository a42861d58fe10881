// SPDX-License-Identifier: MIT
#include "lock/owner.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <mutex>
#include <new>
#include <system_error>
#include <vector>

namespace dlock::lock {

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = getrandom(buf.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : buf) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

namespace {

// The per-thread owners below must be made again in a forked child (its pid and tid are new),
// and they are asked for on every acquisition (the asio API: one per operation), so a fork is
// noticed without a getpid(2) system call each time (glibc does not cache the pid; issue 32).
// The mark is a word in a page the kernel zeroes in every child, however it was made (fork(),
// _Fork(), a raw clone(): the last two run no pthread_atfork handler), for a child that kept its
// parent's owners would share them (and owners are what reentrancy goes by: two holders). Where
// the kernel cannot (before Linux 4.14), the pid is the mark, read each time as before.
std::atomic<std::uint64_t>* map_wiped_on_fork() {
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
  const long page = sysconf(_SC_PAGESIZE);
  void* at = mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (at == MAP_FAILED) return nullptr;
  if (madvise(at, static_cast<std::size_t>(page), MADV_WIPEONFORK) != 0) {
    munmap(at, static_cast<std::size_t>(page));
    return nullptr;
  }
  return new (at) std::atomic<std::uint64_t>(1);
}

// Made as the library loads: on first use, a fork while another thread made it would leave the
// child waiting on the half-done initialization for ever. Until then (a lock taken by another
// library's static initializer) the pid serves. Also zeroed by a pthread_atfork child handler:
// an emulator (QEMU's user mode before 8.0) may accept MADV_WIPEONFORK and do nothing.
constinit std::atomic<std::atomic<std::uint64_t>*> wiped_on_fork{nullptr};
[[maybe_unused]] const bool wiped_on_fork_made = [] {
  std::atomic<std::uint64_t>* word = map_wiped_on_fork();
  if (word == nullptr) return false;
  wiped_on_fork.store(word, std::memory_order_release);
  // Async-signal-safe: one atomic store, in the child's only thread.
  pthread_atfork(nullptr, nullptr, [] {
    wiped_on_fork.load(std::memory_order_relaxed)->store(0, std::memory_order_relaxed);
  });
  return true;
}();
// The marks handed out in this process (a child counts on from its parent's count).
std::atomic<std::uint64_t> marks{1};

// Changes in every forked child, and only there.
std::uint64_t fork_mark() {
  std::atomic<std::uint64_t>* word = wiped_on_fork.load(std::memory_order_acquire);
  if (word == nullptr) return static_cast<std::uint64_t>(getpid());
  std::uint64_t mark = word->load(std::memory_order_acquire);
  if (mark != 0) return mark;
  // A child, the first to ask here: a new mark (never 0, never one of its parent's), agreed on
  // by every thread of the child that asks meanwhile.
  const std::uint64_t fresh = marks.fetch_add(1, std::memory_order_relaxed) + 1;
  if (word->compare_exchange_strong(mark, fresh, std::memory_order_acq_rel)) {
    return fresh;
  }
  return mark;
}

}  // namespace

std::string process_id() {
  static std::mutex mu;
  static pid_t pid = 0;
  static std::string id;
  std::lock_guard lock(mu);
  // A forked child must not share its parent's identity, or both would own the same locks.
  if (pid != getpid()) {
    pid = getpid();
    id = random_hex(16);
  }
  return id;
}

OwnerToken thread_owner() {
  // Built once per thread (and again in a forked child, whose pid and tid are new): every
  // acquisition without an explicit owner asks for it.
  thread_local std::uint64_t mark = 0;
  thread_local std::string owner;
  if (const auto now = fork_mark(); mark != now) {
    mark = now;
    owner = process_id() + ":" + std::to_string(gettid());
  }
  return OwnerToken(owner);
}

OwnerToken task_owner() {
  static std::atomic<std::uint64_t> next{0};
  // The prefix kept per thread (and made again in a forked child): one allocation per owner,
  // the token's own (every asio acquisition without an explicit owner asks for one).
  thread_local std::uint64_t mark = 0;
  thread_local std::string prefix;
  if (const auto now = fork_mark(); mark != now) {
    mark = now;
    prefix = process_id() + ":task-";
  }
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits,
                                 next.fetch_add(1, std::memory_order_relaxed) + 1)
                       .ptr;
  std::string owner;
  owner.reserve(prefix.size() + static_cast<std::size_t>(end - digits));
  owner.append(prefix).append(digits, end);
  return OwnerToken(std::move(owner));
}

}  // namespace dlock::lock

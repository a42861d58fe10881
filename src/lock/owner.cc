// SPDX-License-Identifier: MIT
#include "lock/owner.h"

#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <mutex>
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

// Bumped in a forked child (pthread_atfork), so that the per-thread owners below notice a fork
// with one relaxed load instead of a getpid(2) system call per acquisition (glibc does not cache
// the pid): the asio API asks for an owner on every acquisition (issue 32).
std::atomic<std::uint64_t> fork_generation{1};

std::uint64_t current_fork_generation() {
  static const bool registered = [] {
    // Only the child's handler: it runs in the forking thread, the only one the child has.
    return pthread_atfork(nullptr, nullptr,
                          [] { fork_generation.fetch_add(1, std::memory_order_relaxed); }) == 0;
  }();
  (void)registered;
  return fork_generation.load(std::memory_order_relaxed);
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
  thread_local std::uint64_t generation = 0;
  thread_local std::string owner;
  if (const auto now = current_fork_generation(); generation != now) {
    generation = now;
    owner = process_id() + ":" + std::to_string(gettid());
  }
  return OwnerToken(owner);
}

OwnerToken task_owner() {
  static std::atomic<std::uint64_t> next{0};
  // The prefix kept per thread (and made again in a forked child): one allocation per owner,
  // the token's own (every asio acquisition without an explicit owner asks for one).
  thread_local std::uint64_t generation = 0;
  thread_local std::string prefix;
  if (const auto now = current_fork_generation(); generation != now) {
    generation = now;
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

// SPDX-License-Identifier: MIT
// clock_shift: an LD_PRELOAD library that moves a process's wall clock by
// $DLOCK_CLOCK_SHIFT_MS milliseconds (negative: back), for tests of servers whose clocks
// disagree (test::ShardedCluster::shift_clock). Monotonic clocks are left alone.
// With $DLOCK_CLOCK_SHIFT_FILE instead, the shift is the first 8 bytes of that file (a long
// long, host order), read at every call: a test steps the clock of a running server by
// rewriting them, as an NTP step does (test::RedisServer::set_clock_shift).
//
// Debian's libfaketime does this in general but cannot run Debian's redis-server: redis is
// built with jemalloc, which calls clock_gettime while libfaketime is still resolving its own
// symbols (dlsym allocates), and libfaketime gives up with "Unexpected recursive calls to
// clock_gettime()" (libfaketime issues 130 and 327, no fix upstream). This shim resolves nothing:
// it asks the kernel by raw system call, so it has no start-up that could recurse.
//
// Only the clocks move, not the kernel's timed waits: a deadline computed on the shifted wall
// clock and handed to pthread_cond_timedwait (jemalloc's background thread in redis-server
// does so) is already past when the clock is behind, and the waiter spins. Servers under this
// shim run with `--jemalloc-bg-thread no` (kClockShiftServerArgs, tests/support/redis_server.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

namespace {

// The shift file, mapped (by raw system calls, for the reason above), or null.
const volatile long long* map_shift_file() {
  const char* path = std::getenv("DLOCK_CLOCK_SHIFT_FILE");
  if (path == nullptr) return nullptr;
  const long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  const long p = syscall(SYS_mmap, nullptr, sizeof(long long), PROT_READ, MAP_SHARED, fd, 0);
  syscall(SYS_close, fd);
  if (p == -1) return nullptr;
  return reinterpret_cast<const volatile long long*>(p);
}

long long shift_ns() {
  // getenv allocates nothing, and a function-local static needs no allocator either.
  static const long long shift = [] {
    const char* ms = std::getenv("DLOCK_CLOCK_SHIFT_MS");
    return ms != nullptr ? std::atoll(ms) * 1'000'000LL : 0LL;
  }();
  static const volatile long long* const file = map_shift_file();  // mapped once
  return file != nullptr ? *file * 1'000'000LL : shift;
}

bool wall_clock(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
}

int shifted(clockid_t id, struct timespec* ts) {
  if (syscall(SYS_clock_gettime, id, ts) != 0) return -1;
  if (wall_clock(id)) {
    const long long ns = ts->tv_sec * 1'000'000'000LL + ts->tv_nsec + shift_ns();
    ts->tv_sec = static_cast<time_t>(ns / 1'000'000'000LL);
    ts->tv_nsec = static_cast<long>(ns % 1'000'000'000LL);
  }
  return 0;
}

}  // namespace

extern "C" int clock_gettime(clockid_t id, struct timespec* ts) noexcept {
  return shifted(id, ts);
}

extern "C" int gettimeofday(struct timeval* __restrict tv, void* __restrict) noexcept {
  struct timespec ts {};
  if (shifted(CLOCK_REALTIME, &ts) != 0) return -1;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

extern "C" time_t time(time_t* out) noexcept {
  struct timespec ts {};
  shifted(CLOCK_REALTIME, &ts);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

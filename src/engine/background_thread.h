// SPDX-License-Identifier: MIT
// A thread of dlock's own that takes no asynchronous signal (SIGINT, SIGTERM, SIGCHLD, ...):
// those belong to the application's threads. A process-directed signal goes to any thread that
// does not block it. Landing on a thread of ours, it would run the application's handler in the
// middle of our code and, under ThreadSanitizer, wait there until that thread next calls into
// libc: `dlock run` once never forwarded a SIGTERM because it landed on the thread that sat in
// waitpid() for the very command it was meant for.
#pragma once

#include <signal.h>

#include <thread>
#include <utility>

namespace dlock::engine {

// Starts `body` on a new thread with every asynchronous signal blocked. The mask is set in the
// creating thread around the std::thread constructor (a new thread inherits it), so there is no
// moment at which the new thread takes a signal; the caller's own mask is restored after.
template <class Body>
std::thread background_thread(Body&& body) {
  sigset_t blocked;
  sigfillset(&blocked);
  // Faults are raised by the thread's own instructions and cannot be blocked usefully; SIGPROF
  // is left to sampling profilers.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT, SIGPROF}) {
    sigdelset(&blocked, sig);
  }
  struct MaskedScope {
    sigset_t previous;
    explicit MaskedScope(const sigset_t& blocked) {
      pthread_sigmask(SIG_BLOCK, &blocked, &previous);
    }
    ~MaskedScope() { pthread_sigmask(SIG_SETMASK, &previous, nullptr); }
  } masked(blocked);  // restored even if the thread cannot be created
  return std::thread(std::forward<Body>(body));
}

}  // namespace dlock::engine

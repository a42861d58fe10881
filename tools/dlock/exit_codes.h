// SPDX-License-Identifier: MIT
// Exit statuses of the dlock tool (docs/cli.md). They follow sysexits.h where one fits.
#pragma once

#include <dlock/result.h>

namespace dlock::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 64;        // EX_USAGE: bad flags, durations, URLs, options
inline constexpr int kExitUnavailable = 69;  // EX_UNAVAILABLE: no quorum of nodes reachable
inline constexpr int kExitNotAcquired = 75;  // EX_TEMPFAIL: held by someone else past --wait
inline constexpr int kExitLockLost = 76;     // the lock was lost while COMMAND ran
inline constexpr int kExitCannotExec = 126;  // COMMAND exists but could not be run (as shells)
inline constexpr int kExitNotFound = 127;    // COMMAND not found (as shells)

// The status for a failed acquisition: bad input, contention (-E's code), or no quorum.
inline int exit_for(const Error& e, int conflict_exit_code) {
  if (e.is(errc::invalid_argument)) return kExitUsage;
  if (is_contention(e.code())) return conflict_exit_code;
  return kExitUnavailable;
}

}  // namespace dlock::cli

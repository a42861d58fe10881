// SPDX-License-Identifier: MIT
#pragma once

#include <sys/wait.h>

namespace dlock::cli {

// A waitpid() status as a shell reports it: the exit code, or 128 + the signal number.
inline int exit_status_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// The signal masks of a process's threads, read from /proc: which threads could take a
// process-directed signal.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace dlock::test {

// Thread id -> its blocked-signal mask (bit n-1 for signal n), for every thread of `pid`.
inline std::map<pid_t, std::uint64_t> blocked_signals_by_thread(pid_t pid) {
  std::map<pid_t, std::uint64_t> out;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigBlk:", 0) == 0) {
        out[std::stoi(task.path().filename().string())] = std::stoull(line.substr(7), nullptr, 16);
      }
    }
  }
  return out;
}

inline bool blocks(std::uint64_t mask, int sig) {
  return (mask >> (sig - 1)) & 1u;
}

}  // namespace dlock::test

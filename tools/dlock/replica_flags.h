// SPDX-License-Identifier: MIT
// --min-replicas K --replica-timeout D: the replica guard (LockOptions::min_replicas) for the
// subcommands that take a lock.
#pragma once

#include <dlock/options.h>
#include <dlock/result.h>

#include <CLI/CLI.hpp>
#include <string>

namespace dlock::cli {

struct ReplicaFlags {
  std::size_t min_replicas = 0;
  std::string replica_timeout = "50ms";
};

void add_replica_flags(CLI::App& app, ReplicaFlags& flags);
// Sets the guard in `options`. Errors: a --replica-timeout that is not a duration.
Result<void> apply_replica_flags(const ReplicaFlags& flags, LockOptions& options);

}  // namespace dlock::cli

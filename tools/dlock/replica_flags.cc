// SPDX-License-Identifier: MIT
#include "replica_flags.h"

#include "duration.h"

namespace dlock::cli {

void add_replica_flags(CLI::App& app, ReplicaFlags& flags) {
  app.add_option("--min-replicas", flags.min_replicas,
                 "count a node's grant only once WAIT confirms K of its replicas have the lock "
                 "(default 0: off; see docs/safety.md)")
      ->envname("DLOCK_MIN_REPLICAS")
      ->check(CLI::Range(0, 100));
  app.add_option("--replica-timeout", flags.replica_timeout,
                 "with --min-replicas: how long WAIT may take, below --node-timeout (default 50ms)")
      ->envname("DLOCK_REPLICA_TIMEOUT");
}

Result<void> apply_replica_flags(const ReplicaFlags& flags, LockOptions& options) {
  auto timeout = parse_duration(flags.replica_timeout);
  if (!timeout) return std::move(timeout).error();
  options.min_replicas = flags.min_replicas;
  options.replica_timeout = *timeout;
  return {};
}

}  // namespace dlock::cli

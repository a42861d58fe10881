// SPDX-License-Identifier: MIT
// LocalSentinel: a master with replicas watched by Redis Sentinels, all local redis-server
// processes on loopback, for `dlock sandbox --sentinel` and the tests. Everything it starts it
// stops, by pid.
#pragma once

#include <dlock/result.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "redis_process.h"

namespace dlock::sandbox {

struct LocalSentinelOptions {
  std::size_t replicas = 1;
  std::size_t sentinels = 3;  // a majority of them must agree that the master is down
  std::string master_name = "dlock";
  // How long the master may not answer before the sentinels fail it over.
  std::chrono::milliseconds down_after{1000};
  // Sentinel's failover-timeout. Besides bounding each step of a failover (a promotion not
  // seen within it is given up), it decides how soon the sentinels try again when their leader
  // election splits its votes: only after twice this (sentinel.c), and the election itself gives
  // up after the smaller of this and 10 s. At 10 s a split vote made a failover of 23 s, longer
  // than the leases of the tests that hold a lock through one (SentinelNodeTest); at 4 s it
  // costs about 8 s more than a failover without one, and a promotion (seen by an INFO each
  // second) still has 4 s on a loaded machine before the sentinels give the failover up.
  std::chrono::milliseconds failover_timeout{4000};
  std::string password;  // the master's and the replicas' (requirepass, masterauth)
};

class LocalSentinel {
 public:
  static constexpr std::size_t npos = ~std::size_t{0};

  // Starts the servers (server 0 is the first master) and the sentinels in `dir` (which must
  // exist); returns once the replicas are in sync and every sentinel knows the replicas and the
  // other sentinels, so a failover can happen. Errors: a process that does not start, a set
  // that does not settle in 30 s.
  static Result<std::unique_ptr<LocalSentinel>> start(std::filesystem::path dir,
                                                      LocalSentinelOptions options);
  ~LocalSentinel();
  LocalSentinel(const LocalSentinel&) = delete;
  LocalSentinel& operator=(const LocalSentinel&) = delete;

  // redis-sentinel://127.0.0.1:S1,127.0.0.1:S2,.../NAME (with the password if there is one).
  std::string url() const;
  std::size_t size() const noexcept { return servers_.size(); }
  RedisProcess& server(std::size_t i) { return *servers_[i]; }
  RedisProcess& sentinel(std::size_t i) { return *sentinels_[i]; }
  const LocalSentinelOptions& options() const noexcept { return options_; }

  // The server the first answering sentinel names master now (npos: none, or not one of ours).
  std::size_t master() const;
  // Waits until the sentinels name a master other than `old` that says it is one (false after
  // `limit`).
  bool wait_for_new_master(std::size_t old, std::chrono::milliseconds limit) const;

 private:
  LocalSentinel(std::filesystem::path dir, LocalSentinelOptions options)
      : dir_(std::move(dir)), options_(std::move(options)) {}
  Result<void> start_servers();
  Result<void> start_sentinels();
  bool settled() const;

  std::filesystem::path dir_;
  LocalSentinelOptions options_;
  std::vector<std::unique_ptr<RedisProcess>> servers_;
  std::vector<std::unique_ptr<RedisProcess>> sentinels_;
};

}  // namespace dlock::sandbox

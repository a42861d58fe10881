// SPDX-License-Identifier: MIT
// SentinelSet: a master, its replicas and three Redis Sentinels for tests (sandbox::LocalSentinel
// in a temporary folder of its own, removed afterwards), with what tests do to one: run a
// command on a server, find the master, fail it over.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "local_sentinel.h"
#include "support/redis_server.h"

namespace dlock::test {

class SentinelSet {
 public:
  static constexpr std::size_t npos = sandbox::LocalSentinel::npos;

  // Throws std::runtime_error if the set does not settle.
  explicit SentinelSet(std::size_t replicas = 1, std::string password = {});
  ~SentinelSet();
  SentinelSet(const SentinelSet&) = delete;
  SentinelSet& operator=(const SentinelSet&) = delete;

  std::string url() const { return set_->url(); }
  sandbox::LocalSentinel& set() { return *set_; }
  sandbox::RedisProcess& server(std::size_t i) { return set_->server(i); }
  std::size_t master() const { return set_->master(); }

  // Waits until server i's replicas have everything it wrote so far (false after 10 s).
  bool replicated(std::size_t i) const;
  // A command on server i (a fresh hiredis connection), or null if it does not answer.
  ReplyPtr command(std::size_t i, const std::vector<std::string>& args) const;

 private:
  std::filesystem::path dir_;
  std::string password_;
  std::unique_ptr<sandbox::LocalSentinel> set_;
};

}  // namespace dlock::test

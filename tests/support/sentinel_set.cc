// SPDX-License-Identifier: MIT
#include "support/sentinel_set.h"

#include <cstdlib>
#include <stdexcept>

#include "redis_command.h"
#include "support/replication.h"

namespace dlock::test {

SentinelSet::SentinelSet(std::size_t replicas, std::string password)
    : password_(std::move(password)) {
  char tmpl[] = "/tmp/dlock-sentinel-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  sandbox::LocalSentinelOptions options;
  options.replicas = replicas;
  options.password = password_;
  auto set = sandbox::LocalSentinel::start(dir_, options);
  if (!set) throw std::runtime_error(set.error().message());
  set_ = std::move(*set);
  // Online is not yet acknowledging: a replica that has not confirmed the master's writes
  // refuses the first grant of every new ttl (its record must be on the replicas, WAIT), and a
  // busy machine (clusters starting beside it) showed it on the first lock of fresh sets.
  if (replicas > 0 && !replicated(set_->master())) {
    throw std::runtime_error("the replicas did not acknowledge the master's writes in 10 s");
  }
}

SentinelSet::~SentinelSet() {
  set_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

bool SentinelSet::replicated(std::size_t i) const {
  return replicas_caught_up([&] {
    auto r = command(i, {"INFO", "replication"});
    return r && r->type == REDIS_REPLY_STRING ? std::string(r->str) : std::string();
  });
}

ReplyPtr SentinelSet::command(std::size_t i, const std::vector<std::string>& args) const {
  if (!set_->server(i).running()) return nullptr;
  return sandbox::redis_command(set_->server(i).port(), password_, args);
}

}  // namespace dlock::test

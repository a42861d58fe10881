// SPDX-License-Identifier: MIT
#include "local_sentinel.h"

#include <cstring>
#include <fstream>
#include <thread>

#include "redis_command.h"

namespace dlock::sandbox {
namespace {

// Starts a process in dir/NAME, trying a few free ports.
Result<std::unique_ptr<RedisProcess>> start_process(const std::filesystem::path& dir,
                                                    RedisProcessOptions options) {
  std::filesystem::create_directories(dir);
  for (int attempt = 0;; ++attempt) {
    options.port = free_loopback_port();
    auto process = std::make_unique<RedisProcess>(dir, options);
    auto started = process->start();
    if (started) return process;
    if (attempt == 5) return std::move(started).error();
  }
}

}  // namespace

Result<std::unique_ptr<LocalSentinel>> LocalSentinel::start(std::filesystem::path dir,
                                                            LocalSentinelOptions options) {
  if (options.sentinels == 0 || options.sentinels > 9) {
    return Error(errc::invalid_argument, "1 to 9 sentinels");
  }
  if (options.replicas > 5) return Error(errc::invalid_argument, "at most 5 replicas");
  std::unique_ptr<LocalSentinel> set(new LocalSentinel(std::move(dir), std::move(options)));
  if (auto started = set->start_servers(); !started) return std::move(started).error();
  if (auto started = set->start_sentinels(); !started) return std::move(started).error();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!set->settled()) {
    if (std::chrono::steady_clock::now() >= until) {
      return Error(errc::timeout,
                   "the sentinels did not learn of every replica and sentinel in 30 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return set;
}

Result<void> LocalSentinel::start_servers() {
  const auto& o = options_;
  for (std::size_t i = 0; i <= o.replicas; ++i) {
    RedisProcessOptions process;
    if (!o.password.empty()) {
      process.extra_args = {"--requirepass", o.password, "--masterauth", o.password};
    }
    if (i > 0) {
      process.extra_args.insert(process.extra_args.end(),
                                {"--replicaof", "127.0.0.1", std::to_string(servers_[0]->port())});
    }
    auto server = start_process(dir_ / ("server-" + std::to_string(i + 1)), process);
    if (!server) return std::move(server).error();
    servers_.push_back(std::move(*server));
  }
  return {};
}

Result<void> LocalSentinel::start_sentinels() {
  const auto& o = options_;
  const std::string& name = o.master_name;
  for (std::size_t i = 0; i < o.sentinels; ++i) {
    const auto sentinel_dir = dir_ / ("sentinel-" + std::to_string(i + 1));
    std::filesystem::create_directories(sentinel_dir);
    RedisProcessOptions process;
    process.sentinel = true;
    process.config_file = sentinel_dir / "sentinel.conf";
    std::ofstream conf(process.config_file);
    conf << "sentinel monitor " << name << " 127.0.0.1 " << servers_[0]->port() << " "
         << o.sentinels / 2 + 1 << "\n"
         << "sentinel down-after-milliseconds " << name << " " << o.down_after.count() << "\n"
         << "sentinel failover-timeout " << name << " " << o.failover_timeout.count() << "\n"
         << "sentinel parallel-syncs " << name << " 1\n";
    if (!o.password.empty()) conf << "sentinel auth-pass " << name << " " << o.password << "\n";
    conf.close();
    auto sentinel = start_process(sentinel_dir, process);
    if (!sentinel) return std::move(sentinel).error();
    sentinels_.push_back(std::move(*sentinel));
  }
  return {};
}

bool LocalSentinel::settled() const {
  auto info = redis_command(servers_[0]->port(), options_.password, {"INFO", "replication"});
  if (!info || info->type != REDIS_REPLY_STRING) return false;
  std::size_t online = 0;
  for (const char* at = info->str; (at = std::strstr(at, "state=online")) != nullptr; ++at) {
    ++online;
  }
  if (online < options_.replicas) return false;
  for (const auto& s : sentinels_) {
    auto sentinel_info = redis_command(s->port(), "", {"INFO", "sentinel"});
    if (!sentinel_info || sentinel_info->type != REDIS_REPLY_STRING) return false;
    const std::string text = sentinel_info->str;
    // master0:name=dlock,status=ok,address=...,slaves=1,sentinels=3
    if (text.find("status=ok") == std::string::npos ||
        text.find("slaves=" + std::to_string(options_.replicas)) == std::string::npos ||
        text.find("sentinels=" + std::to_string(options_.sentinels)) == std::string::npos) {
      return false;
    }
  }
  return true;
}

LocalSentinel::~LocalSentinel() {
  sentinels_.clear();  // first, so no failover starts while the servers stop
  servers_.clear();
}

std::string LocalSentinel::url() const {
  std::string url = "redis-sentinel://";
  if (!options_.password.empty()) url += ":" + options_.password + "@";
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    url += (i == 0 ? "127.0.0.1:" : ",127.0.0.1:") + std::to_string(sentinels_[i]->port());
  }
  return url + "/" + options_.master_name;
}

std::size_t LocalSentinel::master() const {
  for (const auto& s : sentinels_) {
    if (!s->running()) continue;
    auto r =
        redis_command(s->port(), "", {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) continue;
    const long port = std::atol(r->element[1]->str);
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (servers_[i]->port() == port) return i;
    }
    return npos;
  }
  return npos;
}

bool LocalSentinel::wait_for_new_master(std::size_t old, std::chrono::milliseconds limit) const {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    const std::size_t m = master();
    if (m != npos && m != old && servers_[m]->running()) {
      auto role = redis_command(servers_[m]->port(), options_.password, {"ROLE"});
      if (role && role->type == REDIS_REPLY_ARRAY && role->elements > 0 &&
          std::strcmp(role->element[0]->str, "master") == 0) {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace dlock::sandbox

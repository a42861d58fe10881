// SPDX-License-Identifier: MIT
#include "support/sharded_cluster.h"

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <stdexcept>

#include "node/slots.h"
#include "redis_command.h"
#include "support/replication.h"

namespace dlock::test {

ShardedCluster::ShardedCluster(std::size_t masters, std::size_t replicas, std::string password)
    : password_(std::move(password)) {
  char tmpl[] = "/tmp/dlock-cluster-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  sandbox::LocalClusterOptions options;
  options.masters = masters;
  options.replicas = replicas;
  if (!password_.empty()) {
    options.extra_args = {"--requirepass", password_};
    options.password = password_;
  }
  auto cluster = sandbox::LocalCluster::start(dir_, options);
  if (!cluster) throw std::runtime_error(cluster.error().message());
  cluster_ = std::move(*cluster);
  // As SentinelSet: the first grant of a new ttl on slot 0's master waits for its replicas.
  for (std::size_t m : replicas > 0 ? this->masters() : std::vector<std::size_t>{}) {
    if (!replicated(m)) {
      throw std::runtime_error("the replicas did not acknowledge the masters' writes in 10 s");
    }
  }
}

ShardedCluster::~ShardedCluster() {
  cluster_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

ReplyPtr ShardedCluster::command(std::size_t i, const std::vector<std::string>& args) const {
  if (!cluster_->server(i).running()) return nullptr;
  return sandbox::redis_command(cluster_->server(i).port(), password_, args, 0,
                                std::chrono::seconds(2));
}

std::string ShardedCluster::id(std::size_t i) const {
  auto r = command(i, {"CLUSTER", "MYID"});
  if (!r || r->type != REDIS_REPLY_STRING) throw std::runtime_error("CLUSTER MYID failed");
  return r->str;
}

std::size_t ShardedCluster::master_of_slot(std::uint16_t slot) const {
  for (std::size_t i = 0; i < size(); ++i) {
    auto r = command(i, {"CLUSTER", "SLOTS"});
    if (!r || r->type != REDIS_REPLY_ARRAY) continue;
    for (std::size_t k = 0; k < r->elements; ++k) {
      const redisReply* e = r->element[k];
      if (e->element[0]->integer > slot || e->element[1]->integer < slot) continue;
      const auto port = e->element[2]->element[1]->integer;
      for (std::size_t j = 0; j < size(); ++j) {
        if (cluster_->server(j).port() == port) return j;
      }
    }
    return npos;
  }
  return npos;
}

std::size_t ShardedCluster::master_of(const std::string& key) const {
  return master_of_slot(node::key_slot(key));
}

std::vector<std::size_t> ShardedCluster::masters() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < size(); ++i) {
    auto role = command(i, {"ROLE"});
    if (!role || role->type != REDIS_REPLY_ARRAY ||
        std::string(role->element[0]->str) != "master") {
      continue;
    }
    out.push_back(i);
  }
  return out;
}

bool ShardedCluster::exists(const std::string& key) const {
  const std::size_t m = master_of(key);
  if (m == npos) return false;
  auto r = command(m, {"EXISTS", key});
  return r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
}

bool ShardedCluster::replicated(std::size_t i) const {
  return replicas_caught_up([&] {
    auto r = command(i, {"INFO", "replication"});
    return r && r->type == REDIS_REPLY_STRING ? std::string(r->str) : std::string();
  });
}

std::size_t ShardedCluster::replica_of(std::size_t master) const {
  const std::string master_id = id(master);
  for (std::size_t i = 0; i < size(); ++i) {
    if (i == master || !cluster_->server(i).running()) continue;
    auto r = command(i, {"CLUSTER", "NODES"});
    if (!r || r->type != REDIS_REPLY_STRING) continue;
    // Our own line says "myself,slave <master id>".
    const std::string nodes = r->str;
    const auto mine = nodes.find("myself,slave " + master_id);
    if (mine != std::string::npos) return i;
  }
  return npos;
}

void ShardedCluster::shift_clock(std::size_t i, std::chrono::milliseconds shift) {
  cluster_->server(i).set_environment({"LD_PRELOAD=" DLOCK_CLOCK_SHIFT_LIB,
                                       "DLOCK_CLOCK_SHIFT_MS=" + std::to_string(shift.count())});
  cluster_->server(i).add_args(test::kClockShiftServerArgs);
  if (auto restarted = cluster_->server(i).restart(true); !restarted) {
    throw std::runtime_error("restart with a shifted clock: " + restarted.error().message());
  }
  if (!wait_until_stable()) throw std::runtime_error("the cluster is not stable after a restart");
}

long long ShardedCluster::time_ms(std::size_t i) const {
  auto r = command(i, {"TIME"});
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return -1;
  return std::atoll(r->element[0]->str) * 1000 + std::atoll(r->element[1]->str) / 1000;
}

void ShardedCluster::begin_migration(std::uint16_t slot, std::size_t to) {
  const std::size_t from = master_of_slot(slot);
  if (from == npos || from == to) throw std::runtime_error("no slot to move");
  const std::string s = std::to_string(slot);
  command(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)});
  command(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", id(to)});
}

void ShardedCluster::migrate_keys(std::uint16_t slot, std::size_t to) {
  const std::size_t from = master_of_slot(slot);
  const std::string s = std::to_string(slot);
  for (;;) {
    auto keys = command(from, {"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (!keys || keys->type != REDIS_REPLY_ARRAY || keys->elements == 0) return;
    std::vector<std::string> migrate{
        "MIGRATE", "127.0.0.1", std::to_string(cluster_->server(to).port()), "", "0", "5000"};
    if (!password_.empty()) migrate.insert(migrate.end(), {"AUTH", password_});
    migrate.push_back("KEYS");
    for (std::size_t k = 0; k < keys->elements; ++k) migrate.push_back(keys->element[k]->str);
    auto r = command(from, migrate);
    if (!r || r->type == REDIS_REPLY_ERROR) {
      throw std::runtime_error(std::string("MIGRATE failed: ") + (r ? r->str : "no answer"));
    }
  }
}

void ShardedCluster::migrate_key(const std::string& key, std::size_t to) {
  std::vector<std::string> migrate{
      "MIGRATE", "127.0.0.1", std::to_string(cluster_->server(to).port()), "", "0", "5000"};
  if (!password_.empty()) migrate.insert(migrate.end(), {"AUTH", password_});
  migrate.insert(migrate.end(), {"KEYS", key});
  auto r = command(master_of(key), migrate);
  if (!r || r->type == REDIS_REPLY_ERROR) {
    throw std::runtime_error(std::string("MIGRATE failed: ") + (r ? r->str : "no answer"));
  }
}

void ShardedCluster::finish_migration(std::uint16_t slot, std::size_t to) {
  const std::string s = std::to_string(slot);
  const std::string target = id(to);
  // The new owner first (it bumps its epoch), then the old one, then everyone else.
  const std::size_t from = master_of_slot(slot);
  command(to, {"CLUSTER", "SETSLOT", s, "NODE", target});
  if (from != npos && from != to) command(from, {"CLUSTER", "SETSLOT", s, "NODE", target});
  for (std::size_t i : masters()) {
    if (i != to && i != from) command(i, {"CLUSTER", "SETSLOT", s, "NODE", target});
  }
}

void ShardedCluster::reassign_slot_without_keys(std::uint16_t slot, std::size_t to) {
  const std::size_t from = master_of_slot(slot);
  if (from == npos || from == to) throw std::runtime_error("no slot to reassign");
  const std::string s = std::to_string(slot);
  const std::string target = id(to);
  // Importing first: SETSLOT NODE on an importing master bumps its config epoch, so that its
  // claim wins over the old owner's.
  command(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)});
  command(to, {"CLUSTER", "SETSLOT", s, "NODE", target});
  for (std::size_t i : masters()) {
    if (i != to && i != from) command(i, {"CLUSTER", "SETSLOT", s, "NODE", target});
  }
}

void ShardedCluster::move_slot(std::uint16_t slot, std::size_t to) {
  begin_migration(slot, to);
  migrate_keys(slot, to);
  finish_migration(slot, to);
}

}  // namespace dlock::test

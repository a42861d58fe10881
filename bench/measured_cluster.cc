// SPDX-License-Identifier: MIT
#include "measured_cluster.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "redis_command.h"

namespace dlock::bench {
namespace {

using namespace std::chrono_literals;

sandbox::RedisReply must(std::uint16_t port, const std::vector<std::string>& args) {
  auto r = sandbox::redis_command(port, "", args);
  if (!r) throw std::runtime_error("port " + std::to_string(port) + ": no answer to " + args[0]);
  if (r->type == REDIS_REPLY_ERROR) {
    throw std::runtime_error("port " + std::to_string(port) + ": " + args[0] + " " +
                             (args.size() > 1 ? args[1] + " " : "") + "failed: " + r->str);
  }
  return r;
}

std::string text_of(std::uint16_t port, const std::vector<std::string>& args) {
  auto r = must(port, args);
  return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS
             ? std::string(r->str, r->len)
             : std::string();
}

// The number after `field` ("used_cpu_sys:", "cmdstat_evalsha:calls=") in INFO text; 0 if
// absent (a command never called has no line).
double number_after(const std::string& info, const std::string& field) {
  const auto at = info.find(field);
  return at == std::string::npos ? 0 : std::stod(info.substr(at + field.size()));
}

}  // namespace

std::unique_ptr<MeasuredCluster> MeasuredCluster::start(const std::filesystem::path& dir,
                                                        std::size_t masters) {
  std::filesystem::create_directories(dir);
  std::unique_ptr<MeasuredCluster> c(new MeasuredCluster());
  if (masters >= 3) {
    sandbox::LocalClusterOptions options;
    options.masters = masters;
    auto cluster = sandbox::LocalCluster::start(dir, options);
    if (!cluster) throw std::runtime_error("cluster: " + cluster.error().message());
    c->cluster_ = std::move(*cluster);
    for (std::size_t i = 0; i < c->cluster_->size(); ++i) {
      c->masters_.push_back(c->cluster_->server(i).port());
    }
    return c;
  }
  if (masters != 1) throw std::invalid_argument("a cluster of 1 master or of 3 or more");
  sandbox::RedisProcessOptions options;
  options.port = sandbox::free_cluster_port();  // the cluster bus takes PORT + 10000 too
  options.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"};
  c->single_ = std::make_unique<sandbox::RedisProcess>(dir, options);
  if (auto started = c->single_->start(); !started) {
    throw std::runtime_error("cluster: " + started.error().message());
  }
  c->masters_ = {c->single_->port()};
  must(c->masters_[0], {"CLUSTER", "ADDSLOTSRANGE", "0", "16383"});
  return c;
}

void MeasuredCluster::wait_until_ready() const {
  const auto until = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    bool ok = true;
    for (auto port : masters_) {
      ok = ok && text_of(port, {"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
    }
    if (ok) return;
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error("cluster: not ready in 30 s");
    }
    std::this_thread::sleep_for(50ms);
  }
}

std::string MeasuredCluster::url() const {
  return "redis-cluster://127.0.0.1:" + std::to_string(masters_.front());
}

std::vector<MasterCounters> MeasuredCluster::counters() const {
  std::vector<MasterCounters> out;
  for (auto port : masters_) {
    const std::string info = text_of(port, {"INFO", "cpu", "commandstats", "errorstats"});
    MasterCounters c;
    c.cpu_seconds = number_after(info, "used_cpu_user:") + number_after(info, "used_cpu_sys:");
    c.script_calls = static_cast<long long>(number_after(info, "cmdstat_evalsha:calls=") +
                                            number_after(info, "cmdstat_eval:calls="));
    c.moved = static_cast<long long>(number_after(info, "errorstat_MOVED:count="));
    out.push_back(c);
  }
  return out;
}

std::uint16_t MeasuredCluster::key_slot(const std::string& key) const {
  return static_cast<std::uint16_t>(must(masters_[0], {"CLUSTER", "KEYSLOT", key})->integer);
}

std::vector<std::size_t> MeasuredCluster::slot_owners() const {
  constexpr std::size_t kNone = ~std::size_t{0};
  std::vector<std::size_t> owners(16384, kNone);
  auto r = must(masters_[0], {"CLUSTER", "SLOTS"});
  for (std::size_t k = 0; k < r->elements; ++k) {
    const redisReply* e = r->element[k];
    const auto port = e->element[2]->element[1]->integer;
    for (std::size_t i = 0; i < masters_.size(); ++i) {
      if (masters_[i] != port) continue;
      for (auto s = e->element[0]->integer; s <= e->element[1]->integer; ++s) {
        owners[static_cast<std::size_t>(s)] = i;
      }
    }
  }
  if (std::find(owners.begin(), owners.end(), kNone) != owners.end()) {
    throw std::runtime_error("cluster: a slot has no master");
  }
  return owners;
}

std::string MeasuredCluster::id(std::size_t master) const {
  return text_of(masters_[master], {"CLUSTER", "MYID"});
}

void MeasuredCluster::move_slot(std::uint16_t slot, std::size_t to) const {
  const std::size_t from = slot_owners()[slot];
  if (from == to) return;
  const std::string s = std::to_string(slot);
  const std::string to_id = id(to);
  must(masters_[to], {"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)});
  must(masters_[from], {"CLUSTER", "SETSLOT", s, "MIGRATING", to_id});
  for (;;) {
    auto keys = must(masters_[from], {"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (keys->elements == 0) break;
    std::vector<std::string> migrate{"MIGRATE", "127.0.0.1", std::to_string(masters_[to]), "", "0",
                                     "5000",    "KEYS"};
    for (std::size_t k = 0; k < keys->elements; ++k) migrate.push_back(keys->element[k]->str);
    must(masters_[from], migrate);
  }
  // The new owner first: with the slot importing, SETSLOT NODE bumps its config epoch, so the
  // cluster bus cannot undo the move. Then the old owner and every other master.
  must(masters_[to], {"CLUSTER", "SETSLOT", s, "NODE", to_id});
  must(masters_[from], {"CLUSTER", "SETSLOT", s, "NODE", to_id});
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    if (i != to && i != from) must(masters_[i], {"CLUSTER", "SETSLOT", s, "NODE", to_id});
  }
}

}  // namespace dlock::bench

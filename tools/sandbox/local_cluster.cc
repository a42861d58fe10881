// SPDX-License-Identifier: MIT
#include "local_cluster.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "redis_command.h"

namespace dlock::sandbox {
namespace {

std::string redis_cli_binary() {
  const char* env = std::getenv("DLOCK_REDIS_CLI");
  return env != nullptr && *env != '\0' ? env : "redis-cli";
}

// Runs argv, its output to /dev/null; the exit status, or -1 if it could not run.
int run_quietly(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// "first-last:port ..." of a CLUSTER SLOTS reply, sorted: equal on servers that agree.
std::string slot_map(const redisReply& r, std::size_t& covered) {
  std::vector<std::string> ranges;
  covered = 0;
  for (std::size_t i = 0; i < r.elements; ++i) {
    const redisReply* e = r.element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
    const auto first = e->element[0]->integer;
    const auto last = e->element[1]->integer;
    covered += static_cast<std::size_t>(last - first + 1);
    ranges.push_back(std::to_string(first) + "-" + std::to_string(last) + ":" +
                     std::to_string(e->element[2]->element[1]->integer));
  }
  std::sort(ranges.begin(), ranges.end());
  std::string out;
  for (const auto& s : ranges) out += s + " ";
  return out;
}

}  // namespace

Result<std::unique_ptr<LocalCluster>> LocalCluster::start(std::filesystem::path dir,
                                                          LocalClusterOptions options) {
  if (options.masters < 3 || options.masters > 20) {
    // redis-cli --cluster create wants at least 3 masters.
    return Error(errc::invalid_argument, "a cluster needs 3 to 20 masters");
  }
  if (options.replicas > 5) return Error(errc::invalid_argument, "at most 5 replicas per master");
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(std::move(dir), std::move(options)));
  const auto& o = cluster->options_;
  const std::size_t total = o.masters * (1 + o.replicas);
  std::vector<std::string> create{redis_cli_binary(), "--cluster", "create"};
  for (std::size_t i = 0; i < total; ++i) {
    const auto server_dir = cluster->dir_ / ("server-" + std::to_string(i + 1));
    std::filesystem::create_directories(server_dir);
    RedisProcessOptions process;
    process.extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                          "--cluster-node-timeout", std::to_string(o.node_timeout.count()),
                          // A replica that lost touch with its master may still take over: a
                          // test decides what it had (and dlock must be safe either way).
                          "--cluster-replica-validity-factor", "0"};
    process.extra_args.insert(process.extra_args.end(), o.extra_args.begin(), o.extra_args.end());
    if (!o.password.empty())
      process.extra_args.insert(process.extra_args.end(), {"--masterauth", o.password});
    for (int attempt = 0;; ++attempt) {
      process.port = free_cluster_port();
      if (process.port == 0) return Error(errc::io_error, "no free port pair for a cluster node");
      auto server = std::make_unique<RedisProcess>(server_dir, process);
      auto started = server->start();
      if (started) {
        cluster->servers_.push_back(std::move(server));
        break;
      }
      if (attempt == 5) return std::move(started).error();
    }
    create.push_back("127.0.0.1:" + std::to_string(cluster->servers_.back()->port()));
  }
  create.insert(create.end(), {"--cluster-replicas", std::to_string(o.replicas), "--cluster-yes"});
  if (!o.password.empty()) create.insert(create.end(), {"-a", o.password, "--no-auth-warning"});
  if (const int status = run_quietly(create); status != 0) {
    return Error(errc::io_error,
                 status == 127 || status == -1
                     ? "'" + redis_cli_binary() + "' not found: apt-get install -y redis-tools"
                     : "redis-cli --cluster create failed (exit " + std::to_string(status) + ")");
  }
  if (!cluster->wait_until_stable(std::chrono::seconds(30))) {
    return Error(errc::timeout, "the cluster did not form in 30 s");
  }
  if (!cluster->wait_for_replicas(std::chrono::seconds(30))) {
    return Error(errc::timeout, "the replicas did not finish their first sync in 30 s");
  }
  return cluster;
}

LocalCluster::~LocalCluster() {
  servers_.clear();  // kills every server, by pid
}

std::string LocalCluster::url() const {
  return "redis-cluster://127.0.0.1:" + std::to_string(servers_.front()->port());
}

bool LocalCluster::wait_for_replicas(std::chrono::milliseconds limit) const {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::size_t online = 0;
    for (const auto& s : servers_) {
      if (!s->running()) continue;
      auto info = redis_command(s->port(), options_.password, {"INFO", "replication"});
      if (!info || info->type != REDIS_REPLY_STRING) continue;
      // One "slaveN:...,state=online,..." line per replica that finished its first sync.
      for (const char* at = info->str; (at = std::strstr(at, "state=online")) != nullptr; ++at) {
        ++online;
      }
    }
    if (online >= options_.masters * options_.replicas) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool LocalCluster::wait_until_stable(std::chrono::milliseconds limit) const {
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool stable = true;
    std::string agreed;
    for (const auto& s : servers_) {
      if (!s->running()) continue;
      auto info = redis_command(s->port(), options_.password, {"CLUSTER", "INFO"});
      auto slots = redis_command(s->port(), options_.password, {"CLUSTER", "SLOTS"});
      std::size_t covered = 0;
      const std::string map =
          slots && slots->type == REDIS_REPLY_ARRAY ? slot_map(*slots, covered) : std::string();
      if (!info || info->type != REDIS_REPLY_STRING ||
          std::strstr(info->str, "cluster_state:ok") == nullptr || covered != 16384 ||
          (!agreed.empty() && map != agreed)) {
        stable = false;
        break;
      }
      agreed = map;
    }
    if (stable) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace dlock::sandbox

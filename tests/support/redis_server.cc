// SPDX-License-Identifier: MIT
#include "redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {

std::uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind a free port");
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string redis_binary() {
  const char* env = std::getenv("DLOCK_REDIS_SERVER");
  return env != nullptr ? env : "redis-server";
}

}  // namespace

bool redis_available() {
  static const bool found = [] {
    const std::string cmd = "command -v " + redis_binary() + " >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;  // NOLINT(cert-env33-c): tests only
  }();
  if (!found) {
    const char* required = std::getenv("DLOCK_REQUIRE_REDIS");
    if (required != nullptr && std::string(required) == "1") {
      throw std::runtime_error("redis-server is required (DLOCK_REQUIRE_REDIS=1) but missing");
    }
  }
  return found;
}

RedisServer::RedisServer(ServerOptions options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/dlock-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  start();
}

RedisServer::~RedisServer() {
  if (pid_ > 0) kill9();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string RedisServer::url() const {
  return std::string(options_.tls ? "rediss" : "redis") + "://127.0.0.1:" + std::to_string(port_);
}

void RedisServer::start() {
  const bool fresh_port = port_ == 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (fresh_port) port_ = free_port();
    std::vector<std::string> args{redis_binary(),
                                  "--bind",
                                  "127.0.0.1",
                                  "--dir",
                                  dir_.string(),
                                  "--save",
                                  "",
                                  "--daemonize",
                                  "no",
                                  "--loglevel",
                                  "warning",
                                  "--logfile",
                                  (dir_ / "redis.log").string()};
    if (options_.tls) {
      const auto& d = options_.tls_dir;
      args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port_),
                               "--tls-cert-file", (d / "server.crt").string(), "--tls-key-file",
                               (d / "server.key").string(), "--tls-ca-cert-file",
                               (d / "ca.crt").string(), "--tls-auth-clients", "optional"});
    } else {
      args.insert(args.end(), {"--port", std::to_string(port_)});
    }
    if (options_.persist) {
      args.insert(args.end(), {"--appendonly", "yes", "--appendfsync", "always"});
    } else {
      args.insert(args.end(), {"--appendonly", "no"});
    }
    args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());

    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      // Die with the test process, so a crashed test leaves no server behind.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      int null = open("/dev/null", O_RDWR);
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    paused_ = false;
    if (wait_ready(std::chrono::seconds(10))) return;
    kill9();
    if (!fresh_port) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw std::runtime_error("redis-server did not start on port " + std::to_string(port_));
}

bool RedisServer::wait_ready(std::chrono::milliseconds limit) const {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) return false;  // exited: port taken?
    timeval tv{0, 200'000};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (c != nullptr && c->err == 0) {
      bool ready = options_.tls;  // the fixture speaks no TLS: a listening port must do
      if (!ready) {
        auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
        ready = r != nullptr &&
                (r->type != REDIS_REPLY_ERROR || std::string(r->str).rfind("NOAUTH", 0) == 0);
        if (r != nullptr) freeReplyObject(r);
      }
      redisFree(c);
      if (ready) return true;
    } else if (c != nullptr) {
      redisFree(c);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void RedisServer::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  paused_ = false;
}

void RedisServer::restart(bool keep_data) {
  kill9();
  if (!keep_data) {
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      if (entry.path().filename() != "redis.log") std::filesystem::remove_all(entry.path());
    }
  }
  start();
}

void RedisServer::pause() {
  ::kill(pid_, SIGSTOP);
  paused_ = true;
}

void RedisServer::resume() {
  ::kill(pid_, SIGCONT);
  paused_ = false;
}

ReplyPtr RedisServer::command(const std::vector<std::string>& args, int db) const {
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return nullptr;
  }
  redisSetTimeout(c, tv);
  if (!options_.password.empty()) {
    freeReplyObject(redisCommand(c, "AUTH %s", options_.password.c_str()));
  }
  if (db != 0) freeReplyObject(redisCommand(c, "SELECT %d", db));
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
  redisFree(c);
  return ReplyPtr(r);
}

bool RedisServer::exists(const std::string& key) const {
  auto r = command({"EXISTS", key});
  if (!r || r->type != REDIS_REPLY_INTEGER) throw std::runtime_error("EXISTS failed");
  return r->integer == 1;
}

RedisCluster::RedisCluster(std::size_t n, ServerOptions options) {
  for (std::size_t i = 0; i < n; ++i) servers_.push_back(std::make_unique<RedisServer>(options));
}

std::vector<std::string> RedisCluster::urls() const {
  std::vector<std::string> out;
  for (const auto& s : servers_) out.push_back(s->url());
  return out;
}

std::string RedisCluster::url_list() const {
  std::string out;
  for (const auto& s : servers_) out += (out.empty() ? "" : ",") + s->url();
  return out;
}

}  // namespace dlock::test

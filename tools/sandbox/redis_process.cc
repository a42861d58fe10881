// SPDX-License-Identifier: MIT
#include "redis_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

namespace dlock::sandbox {
namespace {

constexpr const char* kInstallHint =
    "install it with `apt-get install redis-server` (or run `bash scripts/install-deps.sh`)";

// Binds 127.0.0.1:port (0: any) and returns the bound port, or 0 with errno set.
std::uint16_t try_bind(std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  // As redis-server does: connections of a previous server in TIME_WAIT do not block us.
  const int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  std::uint16_t bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    bound = ntohs(addr.sin_port);
  }
  const int saved = errno;
  close(fd);
  errno = saved;
  return bound;
}

}  // namespace

// A port this process chose stays its own until it exits. A server killed by a test (or a
// sandbox node that crashed) is started again on its port, and clients reconnecting to it
// meanwhile must not reach a server that another process started there: parallel tests did,
// and a foreign client's boot records made a fresh lock set wait for members that remember.
// The claim is a POSIX record lock on byte `port` of one file per user, which the kernel
// drops when the process exits however it ends. Best effort: without the file, no claims.
bool claim_port(std::uint16_t port) {
  static std::mutex mu;
  static std::set<std::uint16_t> mine;
  static const int fd = [] {
    const char* tmp = std::getenv("TMPDIR");
    const std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                             "/dlock-ports-" + std::to_string(getuid()) + ".lock";
    // Never closed: closing any descriptor of the file would drop all of this process's locks.
    return open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  }();
  static pid_t owner = getpid();
  const std::lock_guard<std::mutex> lock(mu);
  if (owner != getpid()) {
    // A forked child: record locks are not inherited, so neither are the claims.
    owner = getpid();
    mine.clear();
  }
  if (fd < 0 || mine.count(port) != 0) return true;
  struct flock range {};
  range.l_type = F_WRLCK;
  range.l_whence = SEEK_SET;
  range.l_start = port;
  range.l_len = 1;
  if (fcntl(fd, F_SETLK, &range) != 0) return false;
  mine.insert(port);
  return true;
}

std::string redis_server_binary() {
  const char* env = std::getenv("DLOCK_REDIS_SERVER");
  return env != nullptr && *env != '\0' ? env : "redis-server";
}

bool redis_server_available() {
  const std::string binary = redis_server_binary();
  if (binary.find('/') != std::string::npos) return access(binary.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end == std::string::npos ? end : end - start);
    if (!dir.empty() && access((dir + "/" + binary).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

std::uint16_t free_loopback_port() {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const std::uint16_t port = try_bind(0);
    if (port == 0) return 0;
    if (claim_port(port)) return port;
  }
  return 0;
}

std::uint16_t free_cluster_port() {
  // Ephemeral ports (32768 and up) leave no room for the bus port 10000 above: pick below.
  static std::atomic<unsigned> next{20000 + static_cast<unsigned>(getpid()) % 10000};
  for (int attempt = 0; attempt < 2000; ++attempt) {
    const auto port = static_cast<std::uint16_t>(20000 + next.fetch_add(7) % 12000);
    const auto bus = static_cast<std::uint16_t>(port + 10000);
    if (try_bind(port) == port && try_bind(bus) != 0 && claim_port(port) && claim_port(bus)) {
      return port;
    }
  }
  return 0;
}

RedisProcess::RedisProcess(std::filesystem::path dir, RedisProcessOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {}

RedisProcess::~RedisProcess() {
  kill9();
}

std::string RedisProcess::url() const {
  return std::string(options_.tls ? "rediss" : "redis") +
         "://127.0.0.1:" + std::to_string(options_.port);
}

std::vector<std::string> RedisProcess::server_args() const {
  std::vector<std::string> args{redis_server_binary()};
  if (!options_.config_file.empty()) args.push_back(options_.config_file.string());
  if (options_.sentinel) args.push_back("--sentinel");
  args.insert(args.end(),
              {"--bind", "127.0.0.1", "--dir", dir_.string(), "--save", "", "--daemonize", "no",
               "--loglevel", "warning", "--logfile", (dir_ / "redis.log").string()});
  if (options_.tls) {
    args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(options_.port)});
  } else {
    args.insert(args.end(), {"--port", std::to_string(options_.port)});
  }
  args.insert(args.end(), {"--appendonly", options_.persist ? "yes" : "no"});
  if (options_.persist) {
    args.insert(args.end(), {"--appendfsync", options_.fsync_always ? "always" : "everysec"});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  return args;
}

Result<void> RedisProcess::start() {
  if (!redis_server_available()) {
    return Error(errc::invalid_argument,
                 "'" + redis_server_binary() + "' not found: " + kInstallHint);
  }
  if (options_.port == 0) options_.port = free_loopback_port();
  if (try_bind(options_.port) == 0) {
    return Error(errc::invalid_argument, "port " + std::to_string(options_.port) +
                                             " on 127.0.0.1 is in use: " + std::strerror(errno));
  }
  std::vector<std::string> args = server_args();
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Made before fork: a child of a threaded process must not allocate.
  std::vector<std::string> env_strings = options_.environment;
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(nullptr);

  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) return Error(errc::io_error, std::string("fork failed: ") + std::strerror(errno));
  if (pid_ == 0) {
    // Die with whoever started us, so nothing is left behind if it crashes.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    const int null = open("/dev/null", O_RDWR);
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return wait_until_answering();
}

Result<void> RedisProcess::wait_until_answering() {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Error(errc::io_error, "redis-server on port " + std::to_string(options_.port) +
                                       " exited at start; see " + (dir_ / "redis.log").string());
    }
    if (answers()) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill9();
  return Error(errc::timeout,
               "redis-server on port " + std::to_string(options_.port) + " did not answer in 10 s");
}

bool RedisProcess::answers() const {
  const timeval tv{0, 200'000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", options_.port, tv);
  bool ok = false;
  if (c != nullptr && c->err == 0) {
    if (options_.tls) {
      ok = true;  // listening is all we can check without speaking TLS
    } else {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      // Any answer but LOADING means it serves (NOAUTH: it wants a password, but it is up).
      ok = r != nullptr &&
           !(r->type == REDIS_REPLY_ERROR && std::strncmp(r->str, "LOADING", 7) == 0);
      if (r != nullptr) freeReplyObject(r);
    }
  }
  if (c != nullptr) redisFree(c);
  return ok;
}

void RedisProcess::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

Result<void> RedisProcess::restart(bool keep_data) {
  kill9();
  if (!keep_data) {
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ignored)) {
      if (entry.path().filename() != "redis.log")
        std::filesystem::remove_all(entry.path(), ignored);
    }
  }
  // The old process's socket may linger a moment: retry the start briefly.
  Result<void> started = start();
  for (int i = 0; i < 20 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    started = start();
  }
  return started;
}

void RedisProcess::pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisProcess::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

}  // namespace dlock::sandbox

// SPDX-License-Identifier: MIT
// RedisServer: a real redis-server process on a free loopback port, for tests. It can be
// killed (-9), restarted (empty, or with its append-only file), paused (SIGSTOP) and resumed,
// and is stopped by pid when the object goes away. Nothing is mocked.
#pragma once

#include <hiredis/hiredis.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "redis_command.h"
#include "redis_process.h"

namespace dlock::test {

using ReplyPtr = sandbox::RedisReply;

// What a server whose wall clock the clock_shift library moves is started with besides: no
// jemalloc background thread. Its timed waits take deadlines from the shifted clock, and with
// the clock behind every deadline is past: it spun a core for as long as such a server ran
// (tests/support/clock_shift.cc).
inline const std::vector<std::string> kClockShiftServerArgs{"--jemalloc-bg-thread", "no"};

struct ServerOptions {
  bool persist = false;                 // appendonly yes, appendfsync always
  std::vector<std::string> extra_args;  // e.g. {"--requirepass", "secret"}
  bool tls = false;                     // serve TLS only, with certificates from tls_dir
  std::filesystem::path tls_dir;        // holds ca.crt, server.crt, server.key
  std::string password;                 // what this fixture uses for its own commands
  bool steppable_clock = false;         // the wall clock can be stepped: set_clock_shift
};

// A server started with these arguments besides the tests' own: with({"--timeout", "1"}).
inline ServerOptions with(std::vector<std::string> args) {
  ServerOptions o;
  o.extra_args = std::move(args);
  return o;
}

class RedisServer {
 public:
  explicit RedisServer(ServerOptions options = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  std::uint16_t port() const { return process_->port(); }
  pid_t pid() const { return process_->pid(); }
  std::string url() const { return process_->url(); }  // redis://127.0.0.1:PORT (rediss:// TLS)

  void kill9();                         // SIGKILL, and wait for the process to go
  void restart(bool keep_data = true);  // kill9 then start on the same port (keep_data: AOF)
  void pause();                         // SIGSTOP: the server stops answering, sockets stay open
  void resume();                        // SIGCONT
  // steppable_clock only: the server's wall clock (what Redis expires keys and scripts read
  // TIME by) reads `shift` off from now on, at once, as after an NTP step (support/clock_shift.cc).
  void set_clock_shift(std::chrono::milliseconds shift);
  bool running() const { return process_->running(); }

  // A command on a fresh connection of the fixture's own (hiredis, plain TCP only).
  ReplyPtr command(const std::vector<std::string>& args, int db = 0) const;
  bool exists(const std::string& key) const;
  // How many times the server ran `command` (lower case), inside scripts too, since the last
  // CONFIG RESETSTAT (INFO commandstats).
  long long calls_of(const std::string& command) const;

 private:
  void write_shift(long long ms);

  ServerOptions options_;
  std::filesystem::path dir_;
  std::unique_ptr<sandbox::RedisProcess> process_;
};

// Several independent servers: the nodes of a Redlock test.
class RedisCluster {
 public:
  explicit RedisCluster(std::size_t n, ServerOptions options = {});
  RedisServer& operator[](std::size_t i) { return *servers_[i]; }
  std::size_t size() const { return servers_.size(); }
  std::vector<std::string> urls() const;
  // Comma-separated, as DLOCK_REDIS takes them.
  std::string url_list() const;

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

// Skips the calling test when redis-server is not installed, unless DLOCK_REQUIRE_REDIS=1
// (set by CI), where a missing server is a failure. Use: DLOCK_REQUIRE_REDIS_OR_SKIP();
bool redis_available();
#define DLOCK_REQUIRE_REDIS_OR_SKIP()                                         \
  do {                                                                        \
    if (!::dlock::test::redis_available()) GTEST_SKIP() << "no redis-server"; \
  } while (0)

// Polls `condition` until it holds or `limit` passes. Tests wait on facts, not on sleeps.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    struct timespec ts {
      0, 10'000'000
    };
    nanosleep(&ts, nullptr);
  }
  return condition();
}

}  // namespace dlock::test

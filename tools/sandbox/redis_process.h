// SPDX-License-Identifier: MIT
// RedisProcess: one local redis-server child process on a loopback port, for the sandbox, the
// demo and the tests. Started and stopped by pid; it can be killed (-9), restarted empty or
// from its append-only file, paused (SIGSTOP) and resumed.
#pragma once

#include <dlock/result.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dlock::sandbox {

struct RedisProcessOptions {
  std::uint16_t port = 0;               // 0: a free port chosen at start
  bool persist = false;                 // appendonly yes
  bool fsync_always = true;             // with persist: appendfsync always (else everysec)
  bool tls = false;                     // serve TLS on the port (certificates in extra_args)
  std::vector<std::string> extra_args;  // e.g. {"--requirepass", "secret"}
  // A config file, given first (a sentinel needs one: it writes what it learns there).
  std::filesystem::path config_file;
  bool sentinel = false;  // run as a Redis Sentinel (--sentinel)
  // "NAME=VALUE" added to the server's environment (tests: a preloaded library that shifts
  // its clock).
  std::vector<std::string> environment;
};

class RedisProcess {
 public:
  // `dir` must exist; the server keeps its log and data there.
  RedisProcess(std::filesystem::path dir, RedisProcessOptions options);
  ~RedisProcess();  // kills the process if it runs
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // Starts the server and waits until it answers. Errors (errc::invalid_argument): no
  // redis-server on PATH (with the install hint), the port in use, or no answer in 10 s.
  Result<void> start();
  void kill9();                                 // SIGKILL; waits for the process to go
  Result<void> restart(bool keep_data = true);  // kill9, then start on the same port
  void pause();                                 // SIGSTOP: stops answering, sockets stay open
  void resume();                                // SIGCONT
  // For the next start (restart): the environment entries added (RedisProcessOptions).
  void set_environment(std::vector<std::string> environment) {
    options_.environment = std::move(environment);
  }
  // For the next start (restart): arguments added to those it was made with.
  void add_args(const std::vector<std::string>& args) {
    options_.extra_args.insert(options_.extra_args.end(), args.begin(), args.end());
  }

  bool running() const noexcept { return pid_ > 0; }
  pid_t pid() const noexcept { return pid_; }
  std::uint16_t port() const noexcept { return options_.port; }
  std::string url() const;  // redis://127.0.0.1:PORT (rediss:// with TLS)
  const std::filesystem::path& dir() const noexcept { return dir_; }

 private:
  bool answers() const;
  // The command line of the server, from the options.
  std::vector<std::string> server_args() const;
  // After the fork: until it answers PING, it exits (an error) or 10 s pass (it is killed).
  Result<void> wait_until_answering();

  const std::filesystem::path dir_;
  RedisProcessOptions options_;
  pid_t pid_ = -1;
};

// The redis-server to run: $DLOCK_REDIS_SERVER, else "redis-server" from PATH.
std::string redis_server_binary();
// True if redis_server_binary() can be executed.
bool redis_server_available();
// Claims a port for this process until it exits (true if it is, or claims are unavailable);
// false if another process claimed it. Every port a test or sandbox picks is claimed, so
// that a port whose server is down for a moment is not taken by a parallel test.
bool claim_port(std::uint16_t port);
// A port on 127.0.0.1 that was free a moment ago, claimed by this process until it exits:
// no other process that picks its ports here takes it, also while its server is down.
std::uint16_t free_loopback_port();
// One for a Redis Cluster node: it and its cluster bus port (10000 above) were free a moment
// ago (both claimed as above); 0 if none was found.
std::uint16_t free_cluster_port();

}  // namespace dlock::sandbox

// SPDX-License-Identifier: MIT
#include "service_under_test.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dlock::bench {
namespace {

bool exited(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == pid;
}

}  // namespace

ServiceUnderTest::ServiceUnderTest(const std::string& binary,
                                   const std::vector<std::string>& redis_urls) {
  std::vector<std::string> args{binary,        "serve",         "--grpc-listen",
                                "127.0.0.1:0", "--http-listen", "127.0.0.1:0"};
  for (const auto& url : redis_urls) {
    args.push_back("-r");
    args.push_back(url);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);  // stderr stays ours
  const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    throw std::runtime_error("cannot start " + binary + ": " + std::strerror(rc));
  }
  try {
    read_addresses(out[0]);
  } catch (...) {
    close(out[0]);
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    throw;
  }
  // The service prints nothing more on stdout; its pipe can close (it never writes again).
  close(out[0]);
}

// Reads the "dlock serve: grpc HOST:PORT" and "dlock serve: http HOST:PORT" lines.
void ServiceUnderTest::read_addresses(int out) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string text;
  while (grpc_.empty() || http_.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    pollfd p{out, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      throw std::runtime_error("dlock serve did not start listening in 10 s");
    }
    char buf[512];
    const ssize_t n = read(out, buf, sizeof buf);
    if (n <= 0) throw std::runtime_error("dlock serve did not start (see above)");
    text.append(buf, static_cast<std::size_t>(n));
    for (auto nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n')) {
      const std::string line = text.substr(0, nl);
      text.erase(0, nl + 1);
      if (line.starts_with("dlock serve: grpc ")) grpc_ = line.substr(18);
      if (line.starts_with("dlock serve: http ")) http_ = line.substr(18);
    }
  }
}

double ServiceUnderTest::cpu_seconds() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) throw std::runtime_error("cannot read the service's CPU time");
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  long long utime = 0;
  long long stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

ServiceUnderTest::~ServiceUnderTest() {
  if (pid_ <= 0 || exited(pid_)) return;
  ::kill(pid_, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (exited(pid_)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

}  // namespace dlock::bench

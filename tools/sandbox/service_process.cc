// SPDX-License-Identifier: MIT
#include "service_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

namespace dlock::sandbox {

Result<std::unique_ptr<ServiceProcess>> ServiceProcess::start(
    const std::vector<std::string>& redis_urls, const std::string& grpc_listen,
    const std::string& http_listen, std::string binary) {
  if (binary.empty()) {
    std::error_code ec;
    binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) return Error(errc::io_error, "cannot find the dlock binary: " + ec.message());
  }
  std::vector<std::string> args{binary,      "serve",         "--grpc-listen",
                                grpc_listen, "--http-listen", http_listen};
  for (const auto& url : redis_urls) {
    args.push_back("-r");
    args.push_back(url);
  }
  // Made before fork: a child of a threaded process must not allocate.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return Error(errc::io_error, std::string("pipe failed: ") + std::strerror(errno));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Error(errc::io_error, std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // A clean stop if the sandbox dies (SIGTERM reaches the service's own signal wait).
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    dup2(out[1], STDOUT_FILENO);  // stderr stays the sandbox's: the service's errors show
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  std::unique_ptr<ServiceProcess> service(new ServiceProcess(pid, out[0]));
  if (auto read = service->read_addresses(grpc_listen != "off", http_listen != "off"); !read) {
    return std::move(read).error();
  }
  return service;
}

// Reads the child's "dlock serve: grpc HOST:PORT" and "dlock serve: http HOST:PORT" lines.
Result<void> ServiceProcess::read_addresses(bool want_grpc, bool want_http) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string text;
  while ((want_grpc && grpc_.empty()) || (want_http && http_.empty())) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    pollfd p{out_, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      return Error(errc::timeout, "dlock serve did not start listening in 10 s");
    }
    char buf[512];
    const ssize_t n = read(out_, buf, sizeof buf);
    if (n <= 0) return Error(errc::io_error, "dlock serve did not start (see above)");
    text.append(buf, static_cast<std::size_t>(n));
    for (auto nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n')) {
      const std::string line = text.substr(0, nl);
      text.erase(0, nl + 1);
      if (line.starts_with("dlock serve: grpc ")) grpc_ = line.substr(18);
      if (line.starts_with("dlock serve: http ")) http_ = line.substr(18);
    }
  }
  return {};
}

bool ServiceProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) pid_ = -1;
  return pid_ > 0;
}

ServiceProcess::~ServiceProcess() {
  if (running()) {
    ::kill(pid_, SIGTERM);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (running() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (running()) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }
  close(out_);
}

}  // namespace dlock::sandbox

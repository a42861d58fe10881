// SPDX-License-Identifier: MIT
// ServiceProcess: a `dlock serve` child process in front of given Redis nodes, for `dlock
// sandbox --service` (and the benchmark's service rows). By default it is this very binary
// (/proc/self/exe), so the sandbox serves what it ships; the child is stopped by SIGTERM (the
// service's clean stop) and dies with its parent.
#pragma once

#include <dlock/result.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace dlock::sandbox {

class ServiceProcess {
 public:
  // Starts `dlock serve -r URL... --grpc-listen G --http-listen H` and waits (10 s at most)
  // for the addresses it prints. `binary`: the dlock tool to run, this very binary when empty
  // (the benchmark, another binary, names the tool its build made). Errors: the binary has no
  // `serve` (built without the service), a port in use (what the service said is on stderr),
  // no answer in time.
  static Result<std::unique_ptr<ServiceProcess>> start(const std::vector<std::string>& redis_urls,
                                                       const std::string& grpc_listen,
                                                       const std::string& http_listen,
                                                       std::string binary = {});
  // SIGTERM, then waits for it (SIGKILL after 10 s).
  ~ServiceProcess();
  ServiceProcess(const ServiceProcess&) = delete;
  ServiceProcess& operator=(const ServiceProcess&) = delete;

  // HOST:PORT the listener took (port 0 resolved); empty when that listener is off.
  const std::string& grpc_address() const { return grpc_; }
  const std::string& http_address() const { return http_; }
  pid_t pid() const { return pid_; }
  // False once the child exited (it is then reaped).
  bool running();

 private:
  ServiceProcess(pid_t pid, int out) : pid_(pid), out_(out) {}
  Result<void> read_addresses(bool want_grpc, bool want_http);
  pid_t pid_;
  int out_;  // the read end of the child's stdout
  std::string grpc_;
  std::string http_;
};

}  // namespace dlock::sandbox

// SPDX-License-Identifier: MIT
// ServiceUnderTest: the `dlock serve` process the benchmark's service rows measure, started from
// the dlock tool this build made (not /proc/self/exe, as the sandbox's ServiceProcess does: the
// bench is another binary), on free loopback ports, and stopped by its pid. It inherits the
// starting thread's CPU affinity, so the caller pins it where the redis-servers run.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace dlock::bench {

class ServiceUnderTest {
 public:
  // Starts `binary serve -r URL... --grpc-listen 127.0.0.1:0 --http-listen 127.0.0.1:0` and
  // reads the addresses it prints (10 s at most). Throws std::runtime_error when it cannot.
  ServiceUnderTest(const std::string& binary, const std::vector<std::string>& redis_urls);
  // SIGTERM (the service's clean stop), then waits for it; SIGKILL after 10 s.
  ~ServiceUnderTest();
  ServiceUnderTest(const ServiceUnderTest&) = delete;
  ServiceUnderTest& operator=(const ServiceUnderTest&) = delete;

  const std::string& grpc_address() const { return grpc_; }  // HOST:PORT
  const std::string& http_address() const { return http_; }
  pid_t pid() const { return pid_; }
  // CPU seconds (user + system, every thread) the service used so far: /proc/<pid>/stat.
  double cpu_seconds() const;

 private:
  void read_addresses(int out);
  pid_t pid_ = -1;
  std::string grpc_;
  std::string http_;
};

}  // namespace dlock::bench

// SPDX-License-Identifier: MIT
// ServiceUnderTest: the `dlock serve` process the benchmark's service rows measure, started by the
// sandbox's ServiceProcess from the dlock tool this build made (the bench is another binary) on
// free loopback ports, and stopped by its pid. It inherits the starting thread's CPU affinity,
// so the caller pins it where the redis-servers run.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "service_process.h"

namespace dlock::bench {

class ServiceUnderTest {
 public:
  // Starts `binary serve -r URL... --grpc-listen 127.0.0.1:0 --http-listen 127.0.0.1:0` and
  // reads the addresses it prints (10 s at most). Throws std::runtime_error when it cannot.
  // The destructor stops it (SIGTERM, the service's clean stop; SIGKILL after 10 s).
  ServiceUnderTest(const std::string& binary, const std::vector<std::string>& redis_urls);

  const std::string& grpc_address() const { return process_->grpc_address(); }  // HOST:PORT
  const std::string& http_address() const { return process_->http_address(); }
  pid_t pid() const { return process_->pid(); }
  // CPU seconds (user + system, every thread) the service used so far: /proc/<pid>/stat.
  double cpu_seconds() const;

 private:
  std::unique_ptr<sandbox::ServiceProcess> process_;
};

}  // namespace dlock::bench

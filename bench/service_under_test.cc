// SPDX-License-Identifier: MIT
#include "service_under_test.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dlock::bench {

ServiceUnderTest::ServiceUnderTest(const std::string& binary,
                                   const std::vector<std::string>& redis_urls) {
  auto started = sandbox::ServiceProcess::start(redis_urls, "127.0.0.1:0", "127.0.0.1:0", binary);
  if (!started) {
    throw std::runtime_error("cannot start " + binary + ": " + started.error().message());
  }
  process_ = std::move(*started);
}

double ServiceUnderTest::cpu_seconds() const {
  std::ifstream in("/proc/" + std::to_string(pid()) + "/stat");
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

}  // namespace dlock::bench

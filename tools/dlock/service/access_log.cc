// SPDX-License-Identifier: MIT
#include "service/access_log.h"

#include <time.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

namespace dlock::service {

namespace {

std::string rfc3339(std::chrono::system_clock::time_point now) {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const time_t seconds = static_cast<time_t>(us / 1'000'000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<long long>(us % 1'000'000));
  return text;
}

}  // namespace

std::string access_line(const AccessEntry& entry, std::chrono::system_clock::time_point now) {
  nlohmann::ordered_json j;
  j["time"] = rfc3339(now);
  j["transport"] = entry.transport;
  j["method"] = entry.method;
  j["name"] = entry.name;
  j["token"] = entry.token;
  j["peer"] = entry.peer;
  int http = 0;
  if (entry.transport == "http" && std::sscanf(entry.status.c_str(), "%d", &http) == 1) {
    j["status"] = http;
  } else {
    j["status"] = entry.status;
  }
  j["duration_us"] = std::chrono::duration_cast<std::chrono::microseconds>(entry.duration).count();
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::shared_ptr<AccessLog>> AccessLog::open(const std::string& path) {
  std::shared_ptr<AccessLog> log(new AccessLog());
  if (path == "-") return log;
  log->file_.open(path, std::ios::app);
  if (!log->file_) {
    return Error(errc::invalid_argument, "--access-log: cannot open " + path + " to append");
  }
  return log;
}

void AccessLog::write(const AccessEntry& entry) {
  const std::string line = access_line(entry, std::chrono::system_clock::now()) + "\n";
  std::lock_guard lock(mu_);
  // Flushed per line: a tail -f, or a crash, sees every call answered so far.
  std::ostream& out = file_.is_open() ? static_cast<std::ostream&>(file_) : std::cerr;
  out << line << std::flush;
}

}  // namespace dlock::service

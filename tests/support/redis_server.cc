// SPDX-License-Identifier: MIT
#include "redis_server.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

namespace dlock::test {

bool redis_available() {
  const bool found = sandbox::redis_server_available();
  if (!found) {
    const char* required = std::getenv("DLOCK_REQUIRE_REDIS");
    if (required != nullptr && std::string(required) == "1") {
      throw std::runtime_error("redis-server is required (DLOCK_REQUIRE_REDIS=1) but missing");
    }
  }
  return found;
}

RedisServer::RedisServer(ServerOptions options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/dlock-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  sandbox::RedisProcessOptions process;
  process.persist = options_.persist;
  process.tls = options_.tls;
  if (options_.tls) {
    const auto& d = options_.tls_dir;
    process.extra_args = {"--tls-cert-file",    (d / "server.crt").string(),
                          "--tls-key-file",     (d / "server.key").string(),
                          "--tls-ca-cert-file", (d / "ca.crt").string(),
                          "--tls-auth-clients", "optional"};
  }
  process.extra_args.insert(process.extra_args.end(), options_.extra_args.begin(),
                            options_.extra_args.end());
  // A free port can be taken by a parallel test between our check and the server's bind:
  // try a few fresh ports.
  if (options_.steppable_clock) {
    // Written in place from now on, never truncated: the server maps its first 8 bytes.
    write_shift(0);
    process.environment = {"LD_PRELOAD=" DLOCK_CLOCK_SHIFT_LIB,
                           "DLOCK_CLOCK_SHIFT_FILE=" + (dir_ / "clock-shift").string()};
    process.extra_args.insert(process.extra_args.end(), kClockShiftServerArgs.begin(),
                              kClockShiftServerArgs.end());
  }
  for (int attempt = 0;; ++attempt) {
    process.port = 0;
    process_ = std::make_unique<sandbox::RedisProcess>(dir_, process);
    auto started = process_->start();
    if (started) break;
    if (attempt == 5) throw std::runtime_error(started.error().message());
  }
}

RedisServer::~RedisServer() {
  process_.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void RedisServer::kill9() {
  process_->kill9();
}

void RedisServer::restart(bool keep_data) {
  auto r = process_->restart(keep_data);
  if (!r) throw std::runtime_error(r.error().message());
}

void RedisServer::write_shift(long long ms) {
  const int fd = ::open((dir_ / "clock-shift").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot write the clock shift file");
  const bool written = ::pwrite(fd, &ms, sizeof ms, 0) == static_cast<ssize_t>(sizeof ms);
  ::close(fd);
  if (!written) throw std::runtime_error("cannot write the clock shift file");
}

void RedisServer::set_clock_shift(std::chrono::milliseconds shift) {
  if (!options_.steppable_clock) throw std::logic_error("set_clock_shift needs steppable_clock");
  write_shift(static_cast<long long>(shift.count()));
}

void RedisServer::pause() {
  process_->pause();
}
void RedisServer::resume() {
  process_->resume();
}

ReplyPtr RedisServer::command(const std::vector<std::string>& args, int db) const {
  return sandbox::redis_command(port(), options_.password, args, db, std::chrono::seconds(2));
}

bool RedisServer::exists(const std::string& key) const {
  auto r = command({"EXISTS", key});
  if (!r || r->type != REDIS_REPLY_INTEGER) throw std::runtime_error("EXISTS failed");
  return r->integer == 1;
}

long long RedisServer::calls_of(const std::string& command) const {
  const auto info = this->command({"INFO", "commandstats"});
  const std::string text = info->str;
  const std::string key = "cmdstat_" + command + ":calls=";
  const auto at = text.find(key);
  return at == std::string::npos ? 0 : std::stoll(text.substr(at + key.size()));
}

RedisCluster::RedisCluster(std::size_t n, ServerOptions options) {
  for (std::size_t i = 0; i < n; ++i) servers_.push_back(std::make_unique<RedisServer>(options));
}

std::vector<std::string> RedisCluster::urls() const {
  std::vector<std::string> out;
  for (const auto& s : servers_) out.push_back(s->url());
  return out;
}

std::string RedisCluster::url_list() const {
  std::string out;
  for (const auto& s : servers_) out += (out.empty() ? "" : ",") + s->url();
  return out;
}

}  // namespace dlock::test

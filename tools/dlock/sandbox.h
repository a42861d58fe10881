// SPDX-License-Identifier: MIT
// Sandbox: N local redis-server processes on loopback in a temporary folder: somewhere to try
// dlock with no infrastructure. Everything it starts it stops, and the folder goes with it.
#pragma once

#include <dlock/result.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "redis_process.h"

namespace dlock::cli {

class Sandbox {
 public:
  // Starts `nodes` servers on ports first_port, first_port+1, ... (0: free ports). Errors say
  // what is wrong: no redis-server (with the install hint), a port in use.
  static Result<std::unique_ptr<Sandbox>> start(std::size_t nodes, std::uint16_t first_port,
                                                bool persist, bool fsync_always = true);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  std::size_t size() const noexcept { return nodes_.size(); }
  RedisProcess& node(std::size_t i) { return *nodes_[i]; }
  std::vector<std::string> urls() const;
  std::string url_list() const;  // comma-separated, as DLOCK_REDIS takes it

 private:
  explicit Sandbox(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<RedisProcess>> nodes_;
};

}  // namespace dlock::cli

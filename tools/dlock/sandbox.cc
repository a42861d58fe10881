// SPDX-License-Identifier: MIT
#include "sandbox.h"

#include <cstdlib>

namespace dlock::cli {

Result<std::unique_ptr<Sandbox>> Sandbox::start(std::size_t nodes, std::uint16_t first_port,
                                                bool persist, bool fsync_always) {
  if (nodes == 0 || nodes > 99) {
    return Error(errc::invalid_argument, "--nodes must be between 1 and 99");
  }
  if (first_port != 0 && first_port + nodes - 1 > 65535) {
    return Error(errc::invalid_argument,
                 "--port leaves no room for " + std::to_string(nodes) + " nodes below 65536");
  }
  char tmpl[] = "/tmp/dlock-sandbox-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Error(errc::io_error, "cannot create a temporary folder");
  std::unique_ptr<Sandbox> sandbox(new Sandbox(tmpl));
  for (std::size_t i = 0; i < nodes; ++i) {
    const auto dir = sandbox->dir_ / ("node-" + std::to_string(i + 1));
    std::filesystem::create_directories(dir);
    RedisProcessOptions options;
    options.persist = persist;
    options.fsync_always = fsync_always;
    options.port = first_port == 0 ? 0 : static_cast<std::uint16_t>(first_port + i);
    auto node = std::make_unique<RedisProcess>(dir, options);
    if (auto started = node->start(); !started) return std::move(started).error();
    sandbox->nodes_.push_back(std::move(node));
  }
  return sandbox;
}

Sandbox::~Sandbox() {
  nodes_.clear();  // kills every server, by pid
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::vector<std::string> Sandbox::urls() const {
  std::vector<std::string> out;
  for (const auto& n : nodes_) out.push_back(n->url());
  return out;
}

std::string Sandbox::url_list() const {
  std::string out;
  for (const auto& n : nodes_) out += (out.empty() ? "" : ",") + n->url();
  return out;
}

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
#include "batch_monitor.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <cctype>

#include "scripts/script.h"

namespace dlock::chaos {
namespace {

using std::chrono::milliseconds;

// The shas a script may be called by (its checked text, and the unguarded one where it has one).
std::vector<std::string> shas_of(const scripts::Script& script) {
  std::vector<std::string> out{script.sha(false)};
  if (script.has_unguarded()) out.push_back(script.sha(true));
  return out;
}

// The first `n` quoted arguments of a MONITOR line, `<time> [<db> <client>] "ARG" "ARG" ...`
// (fewer if it has fewer). Only the command, the sha and the key count are read: none of them
// has an escaped character.
std::vector<std::string> first_args(const std::string& line, std::size_t n) {
  std::vector<std::string> out;
  std::size_t at = line.find("] \"");
  if (at == std::string::npos) return out;
  at += 2;
  while (out.size() < n && at < line.size() && line[at] == '"') {
    const std::size_t end = line.find('"', at + 1);
    if (end == std::string::npos) break;
    out.push_back(line.substr(at + 1, end - at - 1));
    at = end + 2;  // past the closing quote and the space
  }
  return out;
}

void raise_to(std::atomic<std::size_t>& largest, std::size_t value) {
  std::size_t seen = largest.load();
  while (seen < value && !largest.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace

BatchMonitor::BatchMonitor(std::vector<std::uint16_t> ports)
    : acquire_shas_(shas_of(scripts::acquire_batch())),
      release_shas_(shas_of(scripts::release_batch())) {
  for (const auto port : ports) {
    nodes_.push_back(std::make_unique<Node>());
    nodes_.back()->port = port;
  }
  for (auto& node : nodes_) threads_.emplace_back([this, n = node.get()] { watch(*n); });
}

BatchMonitor::~BatchMonitor() {
  stop();
}

void BatchMonitor::stop() {
  stop_ = true;
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void BatchMonitor::watch(Node& node) {
  // A read that waits longer than this gives the connection up and connects again: the node
  // may have been killed and restarted (a new process, which the old connection never reaches),
  // or be stopped; and stop() must not wait for a quiet node.
  const timeval timeout{0, 300'000};
  while (!stop_) {
    redisContext* c = redisConnectWithTimeout("127.0.0.1", node.port, timeout);
    bool monitoring = false;
    if (c != nullptr && c->err == 0 && redisSetTimeout(c, timeout) == REDIS_OK) {
      auto* ok = static_cast<redisReply*>(redisCommand(c, "MONITOR"));
      monitoring = ok != nullptr && ok->type == REDIS_REPLY_STATUS;
      if (ok != nullptr) freeReplyObject(ok);
    }
    while (monitoring && !stop_) {
      void* reply = nullptr;
      if (redisGetReply(c, &reply) != REDIS_OK || reply == nullptr) break;
      const auto* r = static_cast<redisReply*>(reply);
      if (r->type == REDIS_REPLY_STATUS) count(node, std::string(r->str, r->len));
      freeReplyObject(reply);
    }
    if (c != nullptr) redisFree(c);
    if (!stop_ && !monitoring) std::this_thread::sleep_for(milliseconds(100));
  }
}

void BatchMonitor::count(Node& node, const std::string& line) {
  const auto args = first_args(line, 3);
  if (args.size() < 3) return;
  std::string verb = args[0];
  std::transform(verb.begin(), verb.end(), verb.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (verb != "evalsha") return;
  ++node.evalsha;
  std::size_t keys = 0;
  try {
    keys = std::stoul(args[2]);
  } catch (const std::exception&) {
    return;
  }
  const auto has = [&](const std::vector<std::string>& shas) {
    return std::find(shas.begin(), shas.end(), args[1]) != shas.end();
  };
  // acquire_batch.lua: the floor and the max-ttl record, then 3 keys per name;
  // release_batch.lua: 1 key per name (node/batch_call.cc, lock/calls.cc).
  if (has(acquire_shas_) && keys >= 2) {
    ++node.acquire_batches;
    node.acquire_items += (keys - 2) / 3;
    raise_to(node.largest, (keys - 2) / 3);
  } else if (has(release_shas_)) {
    ++node.release_batches;
    node.release_items += keys;
    raise_to(node.largest, keys);
  }
}

std::vector<BatchMonitor::Counts> BatchMonitor::counts() const {
  std::vector<Counts> out;
  for (const auto& n : nodes_) {
    out.push_back(Counts{n->acquire_batches, n->acquire_items, n->release_batches, n->release_items,
                         n->largest, n->evalsha});
  }
  return out;
}

}  // namespace dlock::chaos

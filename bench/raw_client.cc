// SPDX-License-Identifier: MIT
#include "raw_client.h"

#include <poll.h>

#include <memory>
#include <stdexcept>

namespace dlock::bench {

const char* const kCompareAndDelete =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end";

namespace {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

void append(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), ptrs.data(), lens.data()) !=
      REDIS_OK) {
    throw std::runtime_error(std::string("redis: ") + c->errstr);
  }
}

ReplyPtr next_reply(redisContext* c) {
  void* r = nullptr;
  if (redisGetReply(c, &r) != REDIS_OK || r == nullptr) {
    throw std::runtime_error(std::string("redis: ") + c->errstr);
  }
  return ReplyPtr(static_cast<redisReply*>(r));
}

bool is_ok(const redisReply* r) {
  return r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "OK";
}
bool is_one(const redisReply* r) {
  return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
}

}  // namespace

RawNodes::RawNodes(const std::vector<std::uint16_t>& ports) {
  for (auto port : ports) {
    redisContext* c = redisConnect("127.0.0.1", port);
    if (c == nullptr || c->err) {
      const std::string why = c ? c->errstr : "out of memory";
      if (c) redisFree(c);
      throw std::runtime_error("cannot connect to port " + std::to_string(port) + ": " + why);
    }
    nodes_.push_back(Node{c, 0});
  }
  ReplyPtr sha(blocking(0, {"SCRIPT", "LOAD", kCompareAndDelete}));
  release_sha_.assign(sha->str, sha->len);
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    ReplyPtr(blocking(i, {"SCRIPT", "LOAD", kCompareAndDelete}));
  }
}

RawNodes::~RawNodes() {
  for (auto& n : nodes_) redisFree(n.ctx);
}

redisReply* RawNodes::blocking(std::size_t i, const std::vector<std::string>& argv) {
  Node& n = nodes_[i];
  for (; n.owed > 0; --n.owed) next_reply(n.ctx);
  append(n.ctx, argv);
  return next_reply(n.ctx).release();
}

template <typename Ok>
std::size_t RawNodes::round(const std::vector<std::string>& argv, Ok ok, bool wait_all) {
  const std::size_t n = nodes_.size();
  if (n == 1) return ok(ReplyPtr(blocking(0, argv)).get()) ? 1 : 0;

  for (auto& node : nodes_) {
    append(node.ctx, argv);
    int done = 0;
    while (!done) {
      if (redisBufferWrite(node.ctx, &done) != REDIS_OK) {
        throw std::runtime_error(std::string("redis: ") + node.ctx->errstr);
      }
    }
  }
  std::vector<bool> answered(n, false);
  std::size_t answers = 0;
  std::size_t yes = 0;
  std::vector<pollfd> fds(n);
  while (answers < n && (wait_all || (yes < quorum() && answers - yes <= n - quorum()))) {
    for (std::size_t i = 0; i < n; ++i) {
      fds[i] = pollfd{answered[i] ? -1 : nodes_[i].ctx->fd, POLLIN, 0};
    }
    if (poll(fds.data(), n, 5000) <= 0) throw std::runtime_error("redis: no reply in 5 s");
    for (std::size_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      redisContext* c = nodes_[i].ctx;
      if (redisBufferRead(c) != REDIS_OK)
        throw std::runtime_error(std::string("redis: ") + c->errstr);
      void* r = nullptr;
      while (!answered[i] && redisGetReplyFromReader(c, &r) == REDIS_OK && r != nullptr) {
        ReplyPtr reply(static_cast<redisReply*>(r));
        r = nullptr;
        if (nodes_[i].owed > 0) {
          --nodes_[i].owed;  // a straggler of an earlier round
          continue;
        }
        answered[i] = true;
        ++answers;
        if (ok(reply.get())) ++yes;
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!answered[i]) ++nodes_[i].owed;
  }
  return yes;
}

bool RawNodes::acquire(const std::string& name, const std::string& token, int ttl_ms,
                       bool wait_all) {
  return round({"SET", name, token, "NX", "PX", std::to_string(ttl_ms)}, is_ok, wait_all) >=
         quorum();
}

bool RawNodes::release(const std::string& name, const std::string& token) {
  return round({"EVALSHA", release_sha_, "1", name, token}, is_one) >= quorum();
}

void RawNodes::pipelined_cycles(const std::vector<std::string>& names, const std::string& token,
                                int ttl_ms) {
  redisContext* c = nodes_[0].ctx;
  for (; nodes_[0].owed > 0; --nodes_[0].owed) next_reply(c);
  const std::string ttl = std::to_string(ttl_ms);
  for (const auto& name : names) append(c, {"SET", name, token, "NX", "PX", ttl});
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!is_ok(next_reply(c).get())) throw std::runtime_error("raw: SET NX refused");
  }
  for (const auto& name : names) append(c, {"EVALSHA", release_sha_, "1", name, token});
  for (std::size_t i = 0; i < names.size(); ++i) next_reply(c);
}

void RawNodes::pipelined_cycles_all(const std::vector<std::string>& names, const std::string& token,
                                    int ttl_ms) {
  const std::string ttl = std::to_string(ttl_ms);
  for (auto& node : nodes_) {
    for (; node.owed > 0; --node.owed) next_reply(node.ctx);
    for (const auto& name : names) append(node.ctx, {"SET", name, token, "NX", "PX", ttl});
  }
  for (auto& node : nodes_) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (!is_ok(next_reply(node.ctx).get())) throw std::runtime_error("raw: SET NX refused");
    }
  }
  for (auto& node : nodes_) {
    for (const auto& name : names) append(node.ctx, {"EVALSHA", release_sha_, "1", name, token});
  }
  for (auto& node : nodes_) {
    for (std::size_t i = 0; i < names.size(); ++i) next_reply(node.ctx);
  }
}

void RawNodes::eval_release(const std::string& name, const std::string& token) {
  ReplyPtr(blocking(0, {"EVAL", kCompareAndDelete, "1", name, token}));
}

std::string RawNodes::command(std::size_t i, const std::vector<std::string>& argv) {
  ReplyPtr r(blocking(i, argv));
  if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
  return std::string(r->str ? r->str : "", r->str ? r->len : 0);
}

std::string RawNodes::scan_cursor(std::size_t i, const std::string& cursor) {
  ReplyPtr r(blocking(i, {"SCAN", cursor, "COUNT", "10000"}));
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) throw std::runtime_error("bad SCAN reply");
  return std::string(r->element[0]->str, r->element[0]->len);
}

long long RawNodes::info(std::size_t i, const std::string& field) {
  const std::string text = command(i, {"INFO"});
  const auto at = text.find("\r\n" + field + ":");
  if (at == std::string::npos) throw std::runtime_error("INFO has no " + field);
  return std::stoll(text.substr(at + field.size() + 3));
}

}  // namespace dlock::bench

namespace dlock::bench {

double RawNodes::info_real(std::size_t i, const std::string& field) {
  const std::string text = command(i, {"INFO"});
  const auto at = text.find("\r\n" + field + ":");
  if (at == std::string::npos) throw std::runtime_error("INFO has no " + field);
  return std::stod(text.substr(at + field.size() + 3));
}

long long RawNodes::calls(std::size_t i, const std::string& command) {
  const std::string text = this->command(i, {"INFO", "commandstats"});
  const auto at = text.find("cmdstat_" + command + ":calls=");
  if (at == std::string::npos) return 0;
  return std::stoll(text.substr(at + command.size() + 15));
}

}  // namespace dlock::bench

// SPDX-License-Identifier: MIT
// Reader: turns bytes fed in any split into whole Replies. Wraps hiredis' reader (no I/O here):
// hiredis parses, and builds our Reply tree directly through its object functions (no
// redisReply in between, nothing copied twice).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "resp/reply.h"

struct redisReader;

namespace dlock::resp {

class Reader {
 public:
  // Arrays of one reply may hold this many elements in all; more is a protocol error.
  static constexpr long long kMaxElementsPerReply = 1 << 20;

  Reader();
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Appends bytes received from the server. Returns false if the reader is in error.
  bool feed(std::string_view bytes);
  // The next complete reply, if one is buffered. On a protocol error returns nullopt and
  // error() becomes non-empty; the stream cannot be resumed after that.
  std::optional<Reply> next();
  const std::string& error() const noexcept { return error_; }

  // What hiredis' object functions build into (through privdata): the reply being read, and
  // how many more array elements it may have.
  struct Building {
    long long element_budget = kMaxElementsPerReply;
    Reply root;
  };

 private:
  Building building_;
  redisReader* reader_;
  std::string error_;
};

}  // namespace dlock::resp

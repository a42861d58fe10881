// SPDX-License-Identifier: MIT
// One decoded RESP2 reply, owned (no hiredis objects escape the resp layer).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlock::resp {

struct Reply {
  enum class Type { nil, status, error, integer, string, array };

  Type type = Type::nil;
  std::string str;  // status text, error text or bulk string
  std::int64_t integer = 0;
  std::vector<Reply> elements;

  bool is_error() const noexcept { return type == Type::error; }
  bool is_nil() const noexcept { return type == Type::nil; }
  bool is_integer() const noexcept { return type == Type::integer; }
  bool is_array() const noexcept { return type == Type::array; }
  // Error replies start with a code word ("NOSCRIPT", "WRONGPASS", ...).
  bool is_error_code(const char* code) const;
};

}  // namespace dlock::resp

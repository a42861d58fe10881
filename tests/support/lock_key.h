// SPDX-License-Identifier: MIT
// The lock key of a write hold as the tests read it: the string "dlock" F " " HOLD_ID " " OWNER
// (docs/protocol.md, "The lock key"; F the waiter flag '.' or '!'), or an older dlock's hash
// owner -> hold id (its single field). What HGET and HLEN of the key told before the key
// became a string.
#pragma once

#include <optional>
#include <string>

#include "support/redis_server.h"

namespace dlock::test {

struct LockKeyHold {
  std::string owner;
  std::string hold_id;
  char flag = '.';  // '.' or '!'; '?' for an older dlock's hash (no flag)
};

// The write hold in `name` on `server`, or nothing (no key, or a key that is no dlock hold: a
// foreign string, another type, a hash of several fields).
inline std::optional<LockKeyHold> lock_key_hold(const RedisServer& server,
                                                const std::string& name) {
  auto value = server.command({"GET", name});
  if (value && value->type == REDIS_REPLY_STRING) {
    const std::string v(value->str, value->len);
    if (v.size() < 7 || v.compare(0, 5, "dlock") != 0 || (v[5] != '.' && v[5] != '!') ||
        v[6] != ' ') {
      return std::nullopt;
    }
    const auto space = v.find(' ', 7);
    if (space == std::string::npos || space == 7) return std::nullopt;
    return LockKeyHold{v.substr(space + 1), v.substr(7, space - 7), v[5]};
  }
  auto fields = server.command({"HGETALL", name});
  if (!fields || fields->type != REDIS_REPLY_ARRAY || fields->elements != 2) return std::nullopt;
  return LockKeyHold{std::string(fields->element[0]->str, fields->element[0]->len),
                     std::string(fields->element[1]->str, fields->element[1]->len), '?'};
}

}  // namespace dlock::test

// SPDX-License-Identifier: MIT
#include "resp/reply.h"

#include <cstring>

namespace dlock::resp {

bool Reply::is_error_code(const char* code) const {
  const std::size_t n = std::strlen(code);
  return type == Type::error && str.size() >= n && str.compare(0, n, code) == 0 &&
         (str.size() == n || str[n] == ' ');
}

}  // namespace dlock::resp

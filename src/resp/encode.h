// SPDX-License-Identifier: MIT
// RESP encoding of one command (an array of bulk strings), byte for byte what hiredis writes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlock::resp {

// Appends the RESP encoding of `args` (command name first) to `out`.
void append_command(std::string& out, const std::vector<std::string_view>& args);
std::string encode_command(const std::vector<std::string_view>& args);

// The same piece by piece, for a caller whose arguments are not in one vector: the array header
// of a command of `n` arguments, then each argument. bulk_size(arg) is what append_bulk adds at
// most, for reserving.
void append_array_header(std::string& out, std::size_t n);
void append_bulk(std::string& out, std::string_view arg);
constexpr std::size_t bulk_size(std::string_view arg) {
  return arg.size() + 16;  // "$", up to 11 digits, "\r\n", the bytes, "\r\n"
}

}  // namespace dlock::resp

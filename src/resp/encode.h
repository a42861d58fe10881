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

}  // namespace dlock::resp

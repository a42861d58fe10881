// SPDX-License-Identifier: MIT
// RESP framing for the fault-injecting proxy (tcp_proxy.h): where one request or reply ends in a
// byte stream, so a fault can drop or delay whole replies (never half of one, which would only
// test the client's parser) and tell which reply answers which request.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dlock::test {

inline constexpr std::size_t kRespMalformed = static_cast<std::size_t>(-1);

// The length in bytes of the first complete value in `bytes`: a RESP2 or RESP3 value, or an
// inline command (a line that does not start with a RESP type byte). 0 when more bytes are
// needed; kRespMalformed when the bytes cannot be RESP.
std::size_t resp_frame_length(std::string_view bytes);

// The command of a request frame (the first element of a RESP array, or the first word of an
// inline command), upper-cased; empty when there is none.
std::string resp_command_name(std::string_view frame);

}  // namespace dlock::test

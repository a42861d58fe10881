// SPDX-License-Identifier: MIT
#include "support/resp_frames.h"

#include <cctype>
#include <charconv>
#include <cstdint>

namespace dlock::test {
namespace {

// Elements of one aggregate beyond this are not a real reply of ours but garbage.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 24;

bool parse_count(std::string_view line, std::int64_t& out) {
  const auto* end = line.data() + line.size();
  const auto [ptr, ec] = std::from_chars(line.data(), end, out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

std::size_t resp_frame_length(std::string_view b) {
  std::size_t at = 0;
  std::int64_t remaining = 1;  // values still to read, nested aggregates included
  while (remaining > 0) {
    const std::size_t eol = b.find("\r\n", at);
    if (eol == std::string_view::npos) return 0;
    const char type = b[at];
    const std::string_view line = b.substr(at + 1, eol - at - 1);
    const bool top = at == 0;
    at = eol + 2;
    --remaining;
    std::int64_t n = 0;
    switch (type) {
      case '+':
      case '-':
      case ':':
      case ',':
      case '#':
      case '_':
      case '(':
        break;
      case '$':
      case '!':
      case '=':
        if (!parse_count(line, n) || n < -1 || n > kMaxElements * 32) return kRespMalformed;
        if (n < 0) break;
        if (b.size() < at + static_cast<std::size_t>(n) + 2) return 0;
        if (b.substr(at + static_cast<std::size_t>(n), 2) != "\r\n") return kRespMalformed;
        at += static_cast<std::size_t>(n) + 2;
        break;
      case '*':
      case '~':
      case '>':
      case '%':
      case '|':
        if (!parse_count(line, n) || n < -1 || n > kMaxElements) return kRespMalformed;
        if (n <= 0) break;
        // A map holds key-value pairs; an attribute's pairs come before the value they annotate.
        remaining += type == '%' ? 2 * n : type == '|' ? 2 * n + 1 : n;
        break;
      default:
        // A request may be an inline command: one line of words. Inside a value: garbage.
        if (!top) return kRespMalformed;
        return at;
    }
  }
  return at;
}

std::string resp_command_name(std::string_view frame) {
  std::string_view word;
  if (!frame.empty() && frame[0] == '*') {
    const std::size_t header = frame.find("\r\n");
    if (header == std::string_view::npos || frame.size() < header + 3) return {};
    const std::size_t first = header + 2;
    const std::size_t eol = frame.find("\r\n", first);
    std::int64_t n = 0;
    if (frame[first] != '$' || eol == std::string_view::npos ||
        !parse_count(frame.substr(first + 1, eol - first - 1), n) || n < 0) {
      return {};
    }
    word = frame.substr(eol + 2, static_cast<std::size_t>(n));
  } else {
    const std::size_t end = frame.find_first_of(" \r\n");
    word = frame.substr(0, end);
  }
  std::string out(word);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace dlock::test

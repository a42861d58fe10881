// SPDX-License-Identifier: MIT
// RESP encoding of one command (an array of bulk strings), byte for byte what hiredis writes.
#pragma once

#include <charconv>
#include <cstring>
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

// The same written through a pointer into room sized beforehand (no growing, no per-piece
// capacity checks: what a request of every lock cycle is encoded with, issue 32). put_size(s) is
// the most put() writes for `s`: "$", up to 20 digits, "\r\n", the bytes, "\r\n".
constexpr std::size_t put_size(std::string_view s) {
  return s.size() + 25;
}
// Writes `kind` ('*' an array of n, '$' a bulk string of n bytes) and the digits of `n`, then
// CRLF, at `p`; returns the end. Lengths below 100 (nearly every one a lock cycle writes) are
// written directly: to_chars's general loop was about 2% of a blocking cycle's client
// instructions.
inline char* put_header(char* p, char kind, std::size_t n) {
  *p++ = kind;
  if (n < 10) {
    *p++ = static_cast<char>('0' + n);
  } else if (n < 100) {
    *p++ = static_cast<char>('0' + n / 10);
    *p++ = static_cast<char>('0' + n % 10);
  } else {
    p = std::to_chars(p, p + 20, n).ptr;
  }
  *p++ = '\r';
  *p++ = '\n';
  return p;
}
// Writes the bytes of `s` at `p`, then CRLF if `last`; returns the end (a bulk string written in
// pieces: its header first, with the pieces' total length).
inline char* put_bytes(char* p, std::string_view s, bool last = true) {
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  p += s.size();
  if (last) {
    *p++ = '\r';
    *p++ = '\n';
  }
  return p;
}
// Writes `s` as a RESP bulk string at `p` (put_size(s) bytes of room); returns the end.
inline char* put(char* p, std::string_view s) {
  return put_bytes(put_header(p, '$', s.size()), s);
}

}  // namespace dlock::resp

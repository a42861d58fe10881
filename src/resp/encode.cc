// SPDX-License-Identifier: MIT
#include "resp/encode.h"

#include <charconv>

namespace dlock::resp {
namespace {

void append_header(std::string& out, char kind, std::size_t n) {
  char buf[24];
  buf[0] = kind;
  const auto end = std::to_chars(buf + 1, buf + sizeof buf - 2, n).ptr;
  end[0] = '\r';
  end[1] = '\n';
  out.append(buf, static_cast<std::size_t>(end + 2 - buf));
}

}  // namespace

// A command is an array of bulk strings: "*<n>\r\n" then "$<len>\r\n<bytes>\r\n" per argument.
// hiredis 0.14's redisFormatCommandArgv writes the same bytes (the unit tests compare the two)
// but formats every length with sprintf: a third of the client's instructions per lock cycle.
void append_command(std::string& out, const std::vector<std::string_view>& args) {
  std::size_t size = 16;
  for (const auto& a : args) size += bulk_size(a);
  out.reserve(out.size() + size);
  append_array_header(out, args.size());
  for (const auto& a : args) append_bulk(out, a);
}

void append_array_header(std::string& out, std::size_t n) {
  append_header(out, '*', n);
}

void append_bulk(std::string& out, std::string_view arg) {
  append_header(out, '$', arg.size());
  out.append(arg);
  out.append("\r\n", 2);
}

std::string encode_command(const std::vector<std::string_view>& args) {
  std::string out;
  append_command(out, args);
  return out;
}

}  // namespace dlock::resp

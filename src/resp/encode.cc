// SPDX-License-Identifier: MIT
#include "resp/encode.h"

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <new>

namespace dlock::resp {

void append_command(std::string& out, const std::vector<std::string_view>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> argvlen;
  argv.reserve(args.size());
  argvlen.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.data());
    argvlen.push_back(a.size());
  }
  char* target = nullptr;
  const int len =
      redisFormatCommandArgv(&target, static_cast<int>(args.size()), argv.data(), argvlen.data());
  if (len < 0 || target == nullptr) throw std::bad_alloc();
  out.append(target, static_cast<size_t>(len));
  std::free(target);  // NOLINT: allocated by hiredis with malloc
}

std::string encode_command(const std::vector<std::string_view>& args) {
  std::string out;
  append_command(out, args);
  return out;
}

}  // namespace dlock::resp

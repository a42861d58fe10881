// SPDX-License-Identifier: MIT
// libFuzzer target: arbitrary bytes from a "server", fed in arbitrary splits, must give replies
// or a clean error, never a crash, a leak or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "resp/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  dlock::resp::Reader reader;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The first byte chooses the split, so the reader sees frames cut at every position.
  const std::size_t step = size == 0 ? 1 : 1 + data[0] % 17;
  for (std::size_t at = 0; at < bytes.size(); at += step) {
    if (!reader.feed(bytes.substr(at, step))) break;
    while (auto reply = reader.next()) {
      (void)reply->is_error_code("NOSCRIPT");
    }
    if (!reader.error().empty()) break;
  }
  return 0;
}

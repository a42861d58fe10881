// SPDX-License-Identifier: MIT
// libFuzzer target: any string as a duration parses to a non-negative value or is refused.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "duration.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = dlock::cli::parse_duration(text);
  if (d && d->count() < 0) __builtin_trap();
  return 0;
}

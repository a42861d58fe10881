// SPDX-License-Identifier: MIT
// libFuzzer target: any string as a node URL parses or is refused with a message.
#include <cstddef>
#include <cstdint>
#include <string>

#include "net/node_address.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  auto parsed = dlock::net::parse_node_url(url);
  if (parsed) {
    (void)parsed->display();
    (void)parsed->identity();
  } else if (parsed.error().message().empty()) {
    __builtin_trap();  // every refusal must say why
  }
  return 0;
}

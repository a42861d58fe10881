// SPDX-License-Identifier: MIT
#include "node/slots.h"

#include <array>
#include <string>

namespace dlock::node {
namespace {

// CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster specifies.
std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc = static_cast<std::uint16_t>(crc ^ (byte << 8));
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

// Base-36 counting over [0-9a-z], shortest strings first.
std::string counting_name(std::size_t n) {
  static constexpr std::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::size_t length = 1;
  std::size_t span = kDigits.size();
  while (n >= span) {
    n -= span;
    ++length;
    span *= kDigits.size();
  }
  std::string s(length, '0');
  for (std::size_t i = length; i-- > 0;) {
    s[i] = kDigits[n % kDigits.size()];
    n /= kDigits.size();
  }
  return s;
}

struct SlotTags {
  std::array<std::string, kSlotCount> tags;
  SlotTags() {
    // About 170,000 names of up to four characters cover every slot (coupon collector).
    std::size_t missing = kSlotCount;
    for (std::size_t n = 0; missing > 0; ++n) {
      std::string name = counting_name(n);
      auto& tag = tags[key_slot(name)];
      if (tag.empty()) {
        tag = std::move(name);
        --missing;
      }
    }
  }
};

}  // namespace

std::string_view hash_tag(std::string_view key) noexcept {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return {};
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return {};
  return key.substr(open + 1, close - open - 1);
}

std::uint16_t key_slot(std::string_view key) noexcept {
  const auto tag = hash_tag(key);
  return static_cast<std::uint16_t>(crc16(tag.empty() ? key : tag) % kSlotCount);
}

std::string_view slot_tag(std::uint16_t slot) {
  static const SlotTags table;
  return table.tags[slot % kSlotCount];
}

}  // namespace dlock::node

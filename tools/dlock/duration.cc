// SPDX-License-Identifier: MIT
#include "duration.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace dlock::cli {

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  const std::string shown(text);
  auto bad = [&](const std::string& why) {
    return Error(errc::invalid_argument, "invalid duration '" + shown + "': " + why);
  };
  if (text.empty()) return bad("empty");
  std::size_t unit_at = text.size();
  while (unit_at > 0 && std::isalpha(static_cast<unsigned char>(text[unit_at - 1])) != 0) {
    --unit_at;
  }
  const std::string_view number = text.substr(0, unit_at);
  const std::string_view unit = text.substr(unit_at);
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else {
    return bad("unit must be ms, s, m or h");
  }
  if (number.empty()) return bad("no number");
  if (number.front() == '-') return bad("must not be negative");
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value,
                                   std::chars_format::fixed);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) {
    return bad("not a number");
  }
  const double millis = value * scale;
  // Ten years: every flag's deadline (now + duration, in nanoseconds) stays far from overflow.
  if (millis > 10.0 * 365 * 24 * 3600 * 1000) return bad("too large (at most 10 years)");
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(millis)));
}

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// Parsing of the tool's durations: "250ms", "1.5s", "2m", "1h"; a plain number is seconds.
#pragma once

#include <dlock/result.h>

#include <chrono>
#include <string_view>

namespace dlock::cli {

// Errors: errc::invalid_argument for an empty, negative, malformed or out-of-range value.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
// dlock/types.h: the domain's value types, kept distinct so they cannot be mixed up.
//
// OwnerToken  proves ownership of a lock: release and extend act only when it matches.
// FencingToken a number that grows with every acquisition of a name; resources use it to refuse
//              writes from a holder whose lease has already passed to someone else.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <utility>

namespace dlock {

class OwnerToken {
 public:
  OwnerToken() = default;
  explicit OwnerToken(std::string value) : value_(std::move(value)) {}
  const std::string& str() const noexcept { return value_; }
  bool empty() const noexcept { return value_.empty(); }
  friend bool operator==(const OwnerToken&, const OwnerToken&) = default;

 private:
  std::string value_;
};

class FencingToken {
 public:
  constexpr FencingToken() = default;
  constexpr explicit FencingToken(std::uint64_t value) : value_(value) {}
  constexpr std::uint64_t value() const noexcept { return value_; }
  friend constexpr auto operator<=>(const FencingToken&, const FencingToken&) = default;

 private:
  std::uint64_t value_ = 0;
};

}  // namespace dlock

// SPDX-License-Identifier: MIT
// dlock/types.h: the domain's value types, kept distinct so they cannot be mixed up.
//
// OwnerToken  proves ownership of a lock: release and extend act only when it matches.
// FencingToken a number that grows with every acquisition of a name; resources use it to refuse
//              writes from a holder whose lease has already passed to someone else.
// Millis       a duration in whole milliseconds that every std::chrono duration converts to.
//
//   dlock::LockOptions o;
//   o.owner = dlock::OwnerToken("job-" + job_id);  // a task's own owner (see client.h, Owners)
//   o.ttl = 1.5s;                                  // 1500 ms
//   if (lease->fencing_token() > last_seen) ...    // tokens compare
//
// Thread-safety: plain values; copy them freely.
#pragma once

#include <chrono>
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

// Every ttl, timeout and delay in dlock's API: any std::chrono duration converts to it, integer
// or floating point (2s, 1500ms, 1.5s, 250us, std::chrono::duration<double>(0.2)), and it is a
// std::chrono::milliseconds everywhere one is expected. Milliseconds because Redis keeps ttls
// in them (PX). A finer duration is rounded up to the next millisecond, so rounding never
// shortens a ttl or a wait; one beyond the range of milliseconds saturates (no overflow), and
// NaN is zero, which every ttl and timeout refuses.
//
//   dlock::LockOptions o;
//   o.ttl = std::chrono::duration<double>(1.5);  // 1500 ms
//   client.lock("job", 250us);                   // waits up to 1 ms
class Millis : public std::chrono::milliseconds {
 public:
  constexpr Millis() noexcept : std::chrono::milliseconds(0) {}
  constexpr explicit Millis(rep count) noexcept : std::chrono::milliseconds(count) {}
  template <typename Rep, typename Period>
  constexpr Millis(const std::chrono::duration<Rep, Period>& d) noexcept  // NOLINT: implicit
      : std::chrono::milliseconds(round_up(d)) {}

 private:
  template <typename Rep, typename Period>
  static constexpr std::chrono::milliseconds round_up(const std::chrono::duration<Rep, Period>& d) {
    using std::chrono::milliseconds;
    // Range checked in long double first: converting hours::max() to milliseconds overflows.
    const long double wide =
        std::chrono::duration_cast<std::chrono::duration<long double, std::milli>>(d).count();
    if (wide != wide) return milliseconds::zero();  // NaN
    if (wide >= static_cast<long double>(milliseconds::max().count())) return milliseconds::max();
    if (wide <= static_cast<long double>(milliseconds::min().count())) return milliseconds::min();
    // Rounded up in long double (its 64-bit mantissa holds any in-range count exactly enough):
    // std::chrono::ceil would multiply the count by the period's numerator first, which can
    // overflow for periods such as 1/3 s although the result fits.
    const auto whole = static_cast<milliseconds::rep>(wide);  // toward zero
    return milliseconds(static_cast<long double>(whole) < wide ? whole + 1 : whole);
  }
};

}  // namespace dlock

// SPDX-License-Identifier: MIT
#include "lock/hand_off.h"

#include <algorithm>

namespace dlock::lock {

HandOff::Clock::duration HandOff::grace(Clock::duration round_trip) {
  using std::chrono::milliseconds;
  return std::clamp<Clock::duration>(8 * round_trip, milliseconds(3), milliseconds(30));
}

void HandOff::released(const std::string& name, Clock::duration round_trip) {
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  if (until_.size() >= 1024) {  // a client with many names: forget the graces that ended
    std::erase_if(until_, [&](const auto& e) { return e.second <= now; });
  }
  until_[name] = now + grace(round_trip);
}

std::optional<HandOff::Clock::time_point> HandOff::hold_back_until(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = until_.find(name);
  if (it == until_.end()) return std::nullopt;
  const auto until = it->second;
  until_.erase(it);  // once: after the grace this client competes like everyone else
  if (until <= Clock::now()) return std::nullopt;
  return until;
}

}  // namespace dlock::lock

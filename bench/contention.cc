// SPDX-License-Identifier: MIT
#include "contention.h"

#include <algorithm>

namespace dlock::bench {

ContentionStats analyze(const std::vector<std::vector<Acquisition>>& workers) {
  struct Event {
    Acquisition a;
    std::size_t worker;
  };
  std::vector<Event> all;
  for (std::size_t w = 0; w < workers.size(); ++w) {
    for (const auto& a : workers[w]) all.push_back({a, w});
  }
  std::sort(all.begin(), all.end(),
            [](const Event& x, const Event& y) { return x.a.acquired < y.a.acquired; });

  ContentionStats s;
  s.acquisitions = all.size();
  std::vector<std::int64_t> handoffs;
  std::vector<std::int64_t> waits;
  std::size_t barged = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    waits.push_back(all[i].a.acquired - all[i].a.start);
    if (i == 0) continue;
    const Acquisition& prev = all[i - 1].a;
    const Acquisition& cur = all[i].a;
    if (cur.acquired < prev.released) ++s.overlaps;
    if (cur.start > prev.released) {
      // A worker that was not waiting (in this benchmark: the releaser, coming straight back)
      // took the lock. Did anyone else wait at the moment of the release?
      const bool others_waiting = std::any_of(
          all.begin() + static_cast<std::ptrdiff_t>(i) + 1, all.end(),
          [&](const Event& e) { return e.worker != all[i].worker && e.a.start <= prev.released; });
      if (others_waiting) ++barged;
    }
  }
  // Hand-off: for each release that someone else was waiting for, the time until one of
  // those waiting workers held the lock. Barging in between counts against the hand-off: the
  // waiter was still waiting.
  for (std::size_t i = 0; i + 1 < all.size(); ++i) {
    const std::int64_t released = all[i].a.released;
    for (std::size_t j = i + 1; j < all.size(); ++j) {
      if (all[j].worker != all[i].worker && all[j].a.start <= released) {
        handoffs.push_back(all[j].a.acquired - released);
        break;
      }
    }
  }
  s.handoff = summarize(std::move(handoffs));
  s.wait = summarize(std::move(waits));
  s.barging =
      all.size() > 1 ? static_cast<double>(barged) / static_cast<double>(all.size() - 1) : 0;
  return s;
}

}  // namespace dlock::bench

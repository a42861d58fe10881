// SPDX-License-Identifier: MIT
// RoundOutcomes: the outcomes of one round ([call][node]) as they come in, and when the round
// may end: every outcome is in, or, for a single call, `enough` nodes said yes. Both drivers
// of a round use it (NodeSet on the io thread, run_borrowed on the calling thread).
#pragma once

#include <dlock/result.h>

#include <array>
#include <optional>
#include <vector>

#include "node/call.h"
#include "node/fanout.h"

namespace dlock::node {

class RoundOutcomes {
 public:
  RoundOutcomes(std::size_t calls, std::size_t nodes, Enough enough)
      : calls_(calls),
        nodes_(nodes),
        expected_(calls * nodes),
        single_(calls == 1),
        enough_(std::move(enough)) {
    if (expected_ > kInline) heap_.resize(expected_);
  }

  // Ignored once taken: a reply that comes after a return at quorum is dropped (and `enough`
  // may refer to the frame of a Task that has moved on).
  void add(std::size_t call, std::size_t node, Result<resp::Reply> r) {
    ++heard_;
    if (taken_) return;
    if (single_ && r && enough_.needed > 0 && enough_.counts(node, *r)) ++yes_;
    slot(call * nodes_ + node) = std::move(r);
    ++answered_;
  }
  bool complete() const { return answered_ == expected_ || quorum_reached(); }

  // The outcomes; a missing one is errc::cancelled after a return at quorum (`cut_short`
  // false: the round's time ran out, and it is errc::timeout).
  std::vector<Outcomes> take(bool cut_short) {
    taken_ = true;
    std::vector<Outcomes> out;
    out.reserve(calls_);
    for (std::size_t c = 0; c < calls_; ++c) out.push_back(outcomes_of(c, cut_short));
    return out;
  }
  // take() of a round of one call: its outcomes alone, without a vector around them.
  Outcomes take_one(bool cut_short) {
    taken_ = true;
    return outcomes_of(0, cut_short);
  }
  bool taken() const { return taken_; }
  // Outcomes added, those after take() too: every request's callback ran once it is
  // calls * nodes.
  std::size_t heard() const { return heard_; }

 private:
  bool quorum_reached() const { return single_ && enough_.reached(yes_); }
  Outcomes outcomes_of(std::size_t c, bool cut_short) {
    const bool quorum_return = cut_short && answered_ < expected_;
    Outcomes out;
    out.reserve(nodes_);
    for (std::size_t i = 0; i < nodes_; ++i) {
      auto& o = slot(c * nodes_ + i);
      if (o) {
        out.push_back(std::move(*o));
      } else if (quorum_return) {
        out.push_back(Error(errc::cancelled, "not waited for: a quorum had answered"));
      } else {
        out.push_back(Error(errc::timeout, "no answer"));
      }
    }
    return out;
  }

  using Slot = std::optional<Result<resp::Reply>>;
  // [call * nodes + node]: in place for a round of up to kInline outcomes (one call to up to
  // five nodes), so that the round's bookkeeping is the one allocation of whoever holds it
  // (issue 32); else one allocation for the round, not one per call. Not more: NodeSet's
  // Gathering holds this, and past about 1 KiB it would leave malloc's per-thread cache.
  static constexpr std::size_t kInline = 5;
  Slot& slot(std::size_t k) { return expected_ > kInline ? heap_[k] : inline_[k]; }
  std::array<Slot, kInline> inline_{};
  std::vector<Slot> heap_;
  const std::size_t calls_;
  const std::size_t nodes_;
  std::size_t answered_ = 0;
  std::size_t yes_ = 0;  // answers that count towards Enough
  std::size_t heard_ = 0;
  bool taken_ = false;
  const std::size_t expected_;
  const bool single_;
  Enough enough_;
};

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
// The quorum decisions of QuorumLock as pure functions over per-node outcomes: what each
// script's reply means (parsed into a named type next to nothing else), how the answers of N
// nodes add up, which fencing token an acquisition gets and whether it must be raised. No I/O
// and no clock reads: unit tests and the simulation feed them canned and adversarial outcomes
// (lost replies, calls never sent, errors, stale holds, quarantined nodes).
#pragma once

#include <dlock/result.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "resp/reply.h"

namespace dlock::lock {

// One node's answer to acquire.lua / fair_acquire.lua.
struct AcquireReply {
  // mismatch: a slot of a semaphore whose record on the node names another permit count.
  enum class Kind { granted, held, mismatch, failed };
  Kind kind = Kind::failed;
  std::uint64_t counter = 0;     // granted: the fencing counter after INCR; held: as it is
  std::int64_t holder_ttl = -1;  // held: the holder's pttl in ms (-1: none, -2: a waiter is first)
  std::int64_t permits = 0;      // mismatch: the permit count the node recorded
  bool writer_registered = false;  // held by readers, and this writer registered as waiting
  Error error;                     // failed: why (no answer, error reply, bad shape)
};
AcquireReply parse_acquire(const Result<resp::Reply>& outcome);

// How the answers to one acquisition add up.
struct AcquireTally {
  std::size_t granted = 0;  // voting nodes that granted
  std::size_t held = 0;     // nodes that said another owner holds it
  // The token to hand out: larger than every counter seen on a node that refused, and not
  // smaller than any granting node's counter.
  std::uint64_t token = 0;
  // A quorum of voting nodes already hold `token` as their counter: no raise is needed.
  bool token_on_quorum = false;
  std::optional<std::chrono::milliseconds> holder_ttl;  // the longest pttl of a refusing holder
  bool writer_registered = false;  // some node registered the writer as waiting for readers
  // A node recorded another permit count for the semaphore (its count): the attempt must fail,
  // whatever the others said.
  std::optional<std::int64_t> recorded_permits;
};
// `votes[i]`: node i may count for a quorum (not quarantined, same connection as greeted).
AcquireTally tally_acquire(const std::vector<AcquireReply>& replies, const std::vector<bool>& votes,
                           std::size_t quorum);

// One node's answer to release.lua: freed (and how many listened), or not ours, or failed.
struct ReleaseReply {
  enum class Kind { freed, not_held, failed };
  Kind kind = Kind::failed;
  std::int64_t listeners = 0;
  Error error;
};
ReleaseReply parse_release(const Result<resp::Reply>& outcome);

// One node's answer for the slot-th hold of a renew.lua batch.
enum class RenewReply { renewed, not_held, failed };
RenewReply parse_renew(const Result<resp::Reply>& outcome, std::size_t slot);

// The judgement on an extension of one hold (extend(), the watchdog, a reentrant acquisition).
// lost: a quorum said the hold is not there; expired: the validity it was judged against ended
// before the answers came (the nodes' word is not decisive then).
enum class Extension { extended, lost, expired, no_quorum };
// `now` is after the answers came in, `start` before the requests went out.
Extension judge_extension(std::size_t extended, std::size_t errors, std::size_t quorum,
                          std::chrono::milliseconds ttl, double drift_factor,
                          std::chrono::steady_clock::time_point start,
                          std::chrono::steady_clock::time_point now,
                          std::chrono::steady_clock::time_point valid_until);

// Membership: the replies of hello.lua from every node. Returns, per greeted node, the
// shortest time since its boot that any answering node reported (nullopt: no node saw it boot
// while in use), and in `max_ttl` the largest ttl any answer named. `told` counts the nodes
// whose reply had the expected shape.
struct BootReport {
  std::vector<std::optional<std::chrono::milliseconds>> boot_age;
  std::chrono::milliseconds max_ttl{0};
  std::size_t told = 0;
};
BootReport tally_hello(const std::vector<Result<resp::Reply>>& replies, std::size_t greeted);

}  // namespace dlock::lock

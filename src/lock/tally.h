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
#include <string>
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

// A script's error reply as the user reads it. The scripts read the lock key itself with pcall
// (a key of another type there is another library's lock: held, never touched), so a WRONGTYPE
// that reaches the client comes from one of dlock's own keys on the node (dlock:...) that
// something else wrote; the server's text names only a line of the script: say where to look.
std::string script_error_text(const std::string& server_text);

// How the answers to one acquisition add up.
struct AcquireTally {
  std::size_t granted = 0;  // voting nodes that granted
  std::size_t held = 0;     // nodes that said another owner holds it
  // The token to hand out: larger than every counter seen on a node that refused, and not
  // smaller than any granting node's counter.
  std::uint64_t token = 0;
  // A quorum of voting nodes already hold `token` as their counter: the token is safe without
  // a raise.
  bool token_on_quorum = false;
  // Some node (voting or not) granted with a counter below `token`: it is raised all the same,
  // or it stays behind for as long as the name is in use, one failure away from handing out a
  // token again (issue 28).
  bool granted_below = false;
  std::optional<std::chrono::milliseconds> holder_ttl;  // the longest pttl of a refusing holder
  // Some refusing node keeps the name with a key that never expires (another library's): the
  // name may never free by itself, whatever holder_ttl says of the others.
  bool holder_without_ttl = false;
  bool writer_registered = false;  // some node registered the writer as waiting for readers
  // A node recorded another permit count for the semaphore (its count): the attempt must fail,
  // whatever the others said.
  std::optional<std::int64_t> recorded_permits;
};
// `votes[i]`: node i may count for a quorum (not quarantined, same connection as greeted).
AcquireTally tally_acquire(const std::vector<AcquireReply>& replies, const std::vector<bool>& votes,
                           std::size_t quorum);

// The nodes whose grant counts (granted and voting): only they may confirm a fence raise.
std::vector<bool> granting_voters(const std::vector<AcquireReply>& replies,
                                  const std::vector<bool>& votes);

// One node's answer to release.lua: freed (and how many listened), or not ours, or failed.
struct ReleaseReply {
  enum class Kind { freed, not_held, failed };
  Kind kind = Kind::failed;
  std::int64_t listeners = 0;
  Error error;
};
ReleaseReply parse_release(const Result<resp::Reply>& outcome);
// Whether a release reply says freed, as parse_release's kind would, read in place: the round's
// return-at-quorum test gets a bare reply, and making it a Result copied the reply.
bool release_freed(const resp::Reply& reply);

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

// Membership: the replies of hello.lua ('greet') from every node. `greeted[k]` is the node
// index of the k-th identity the greeting named.
struct BootReport {
  // Per greeted node: the shortest time since its boot that any answering node reported
  // (nullopt: no node saw it boot while in use), and the shortest that another node reported
  // (its own report does not make it a restarted node in the eyes of others: a lone node's
  // replicated records report its own failover).
  std::vector<std::optional<std::chrono::milliseconds>> boot_age;
  std::vector<std::optional<std::chrono::milliseconds>> age_by_others;
  std::vector<bool> answered;            // its reply had the expected shape
  std::vector<bool> in_use;              // ... and it said it is in use (it holds boot records)
  std::chrono::milliseconds max_ttl{0};  // the largest any answer named
  std::size_t told = 0;                  // replies with the expected shape, greeted or not
  bool any_in_use = false;               // some answer, greeted or not, came from a node in use
  // Per node (by node index, greeted or not): the fence floor it reported (0: none, or no
  // answer of the expected shape); and the largest of them.
  std::vector<std::uint64_t> floors;
  std::uint64_t largest_floor = 0;
};
BootReport tally_hello(const std::vector<Result<resp::Reply>>& replies,
                       const std::vector<std::size_t>& greeted);

// Whether a greeting's answers can be trusted, and so its quarantines and largest ttl. An
// answer counts only from a node in use that no other node reports as booted within the
// largest ttl: a node that restarted empty knows no ttl and no boot, and a node never made a
// member (not in use) has no records of the set. Every lease was granted by a quorum of nodes
// that were in use, so the counted nodes must meet every such quorum: with `fresh` answering
// nodes known never to have been members (not in use, and no member saw them boot), at most
// N - fresh nodes can hold leases, and counted + fresh >= N - quorum + 1 makes the counted ones
// meet each quorum in a node that remembers. A brand-new set (no answer from a node in use)
// starts only when all N answer, or, with `start_from_quorum`, a quorum (an opt-in: it cannot
// tell a new set from one whose members all restarted empty). Either way a quorum must answer.
struct GreetingVerdict {
  bool trusted = false;
  std::size_t counted = 0;
  std::size_t fresh = 0;
  bool brand_new = false;
};
GreetingVerdict judge_greeting(const BootReport& report, std::size_t nodes, std::size_t quorum,
                               bool start_from_quorum);

}  // namespace dlock::lock

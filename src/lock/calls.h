// SPDX-License-Identifier: MIT
// The lock's calls to its nodes, one named builder per script use: what each sends (keys and
// arguments in the order its script in src/scripts/ documents) and the routing facts the node
// layer needs (node::Call): which keys exist once per node, the ttl a node records before an
// acquisition, how a batch may be split. The node layer routes by these and never reads a
// script's name, its keys' names or an ARGV position.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lock/hold.h"
#include "node/call.h"

namespace dlock::lock {

// Fair mode: the waiter's place in line (see fair_acquire.lua).
struct FairTicket {
  std::int64_t arrival_ms = 0;  // wall-clock ms when the waiter first asked; same on all nodes
  std::chrono::milliseconds waiter_timeout{0};
  bool enqueue = false;  // join the queue if the lock cannot be had now
};

// A write acquisition that may wait: refused because readers hold the lock, it is registered on
// the nodes as a waiting writer for `register_for` (new readers stay out meanwhile: no writer
// starvation). `registered`: an earlier attempt may have registered it; a grant then drops the
// registration. Zero register_for: only try (try_lock), register nothing. `waited`: an attempt
// of a wait after a refusal; its grant is written with the waiter flag set (acquire.lua
// ARGV[6] '1'), so that its release publishes: other waiters of the name may sleep unflagged
// behind it (a client wakes one plain waiter per release message, docs/protocol.md).
struct WriterWait {
  std::chrono::milliseconds register_for{0};
  bool registered = false;
  bool waited = false;
};

// One hold for a batched renewal.
struct Renewal {
  HoldId hold;
  std::chrono::milliseconds ttl{0};
  std::chrono::steady_clock::time_point valid_until;
};

// Where a renewal's entry sits among the renew calls.
struct RenewPlace {
  std::size_t call = 0;
  std::size_t entry = 0;
};

// The renew.lua calls for renewals[live[j]], each at places[j] (places.size() == live.size()):
// up to 256 holds per call (bounds the time one call blocks a node). A semaphore's permits
// re-arm its permit record in the same call (one entry per semaphore and call, with the
// largest ttl), so that the record lives as long as they do; its reply is not part of any
// judgement. A cluster node may split each call by key (Call::args_per_key).
std::vector<node::Call> renew_calls(const std::vector<Renewal>& renewals,
                                    const std::vector<std::size_t>& live,
                                    std::vector<RenewPlace>& places);

// How acquire.lua counts fencing tokens: with the name's counter (what older clients of several
// nodes send), or with the node's (one INCR, cheaper: what this client sends on any lock set).
enum class TokenCounter { name, node };

// acquire.lua (or fair_acquire.lua with `fair`, which always counts by name) for a new hold of
// `ttl`; `permits` > 0 for a slot of a semaphore (its permit record and count). `announcement`:
// the digits of the greeting it is made under (lock::Membership).
node::Call acquire_call(const HoldId& hold, std::chrono::milliseconds ttl,
                        const std::optional<FairTicket>& fair, WriterWait writer,
                        std::size_t permits, node::SharedText announcement,
                        TokenCounter counter = TokenCounter::name);

// What a cluster node runs in its home slot before an acquisition of `ttl` made under
// `announcement` (Call::record_call): the greeting's record of that ttl, max_ttl_raise.lua with
// the member "<ttl>.<digits>" for twice the ttl, so that a retraction takes it back. With no
// announcement, the bare member "<ttl>", which no retraction removes: what a cluster node
// records there after a grant (Call::granted).
node::Call announced_ttl_call(std::chrono::milliseconds ttl, const std::string& announcement);

// Whether a reply of acquire.lua or fair_acquire.lua is a grant (Call::granted).
bool acquire_granted(const resp::Reply& reply);

// release.lua for `hold` (its permit record too, for a semaphore's slot).
node::Call release_call(const HoldId& hold);

// fair_leave.lua: `owner` leaves the name's queue and its writers' waiting list.
node::Call fair_leave_call(const std::string& name, const OwnerToken& owner);

// fence_raise.lua: the counter of `hold`'s name and the node's floor raised to at least
// `token`; the reply says whether `hold` is still on the node (the lock key for a write hold or
// a semaphore's slot, the name's readers for a read hold).
node::Call fence_raise_call(const HoldId& hold, std::uint64_t token, std::chrono::milliseconds ttl);

// max_ttl_raise.lua for a renewal round: the node's record of lease ttls holds the bare `ttl`
// for twice `ttl` more ms. Like a grant's record (Call::records_itself), a node whose master
// holds the locks' keys and that record counts it only once its replicas confirmed it, unless
// a record confirmed before still covers `ttl` (docs/safety.md, "A ttl new to the master that
// holds the lock"): else an extension to a larger ttl, or a renewal long after the last
// confirmation, could count on a master whose lossy failover loses the keys and the record.
node::Call max_ttl_raise_call(std::chrono::milliseconds ttl);

// Whether a reply of max_ttl_raise.lua says the ttl is recorded (Call::granted of the call above).
bool ttl_recorded(const resp::Reply& reply);

// max_ttl_retract.lua: the announcement members taken back.
node::Call max_ttl_retract_call(std::vector<std::string> members);

// hello.lua with its arguments (lock/membership.cc builds them: mode, boots, ages).
node::Call hello_call(std::vector<std::string> args);

// floor_raise.lua: the node's fence floor raised to at least `floor`.
node::Call floor_raise_call(std::uint64_t floor);

// inspect.lua: what a node holds under `name` (Client::status).
node::Call inspect_call(const std::string& name);

// force_release.lua: every hold of `name` deleted, its waiters woken.
node::Call force_release_call(const std::string& name, bool include_foreign);

// semaphore_resize.lua: semaphore `name`'s recorded count set to `permits`, its slots from
// `check_from` up to `max_permits` read for holders.
node::Call semaphore_resize_call(const std::string& name, std::size_t permits,
                                 std::size_t check_from, std::size_t max_permits);

}  // namespace dlock::lock

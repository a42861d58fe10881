// SPDX-License-Identifier: MIT
#include "lock/calls.h"

#include <map>

#include "lock/keys.h"
#include "lock/tally.h"
#include "resp/encode.h"
#include "scripts/script.h"

namespace dlock::lock {
namespace {

// Bit i: keys[i] is a node key (node::Call::node_keys).
constexpr std::uint32_t key_bit(std::size_t i) {
  return std::uint32_t{1} << i;
}

// The auxiliary key PREFIX{NAME} of `name` (lock/keys.h) as the next of `strings`, written in
// place: as a std::string of its own first, most keys would cost an allocation (issue 32).
void push_key(node::Strings& strings, std::string_view prefix, std::string_view name) {
  strings.push_back_written([&](std::string& out) { append_auxiliary_key(out, prefix, name); });
}

// The keys of a lock cycle's call on `name`, room made for all of them: one allocation.
node::Strings keys_for(const std::string& name) {
  node::Strings keys;
  // Up to 8 keys: each the name (or its tag and the name), a prefix of at most 22 and 4 more.
  keys.reserve(8 * (2 * name.size() + 26));
  return keys;
}

// The arguments of a lock cycle's call for `hold`: one allocation for the owner, the hold id,
// a channel (a prefix and the name, twice with a tag) and short numbers.
node::Strings args_for(const HoldId& hold) {
  node::Strings args;
  args.reserve(hold.owner.str().size() + hold.id.size() + 2 * hold.name.size() + 128);
  return args;
}

// Group commit (docs/protocol.md): acquire_batch.lua runs acquire.lua's path for a free name,
// counted by the node's counter or by the name's, the only path it has: nothing it would need
// to refuse, register, flag (a waiter's attempt) or count in a semaphore's permit record. Its item:
// NAME, the name's counter, the readers (keys 0, 1, 4); owner, hold id, ttl, counter (arguments 0-2
// and 6). The floor and the max-ttl record (keys 2, 3) once per batch call. None for any other
// acquisition.
node::BatchForm acquire_batch_form(const HoldId& hold, bool fair, WriterWait writer,
                                   bool slot_of_semaphore) {
  if (hold.kind != HoldKind::write || fair || writer.registered || writer.waited ||
      slot_of_semaphore) {
    return {};
  }
  return node::BatchForm{&scripts::acquire_batch(), key_bit(0) | key_bit(1) | key_bit(4),
                         key_bit(0) | key_bit(1) | key_bit(2) | key_bit(6),
                         key_bit(2) | key_bit(3)};
}

// The native acquisition (docs/protocol.md, "The native acquisition"): acquire.lua's fast path
// for a free name counted by the node's counter, as four plain commands written together,
// which a server node sends where the script would skip its check of the max-ttl record:
//   SET NAME "dlock. HOLD_ID OWNER" NX PX ttl       the hold, only if NAME is absent (any type)
//   EXISTS dlock:readers:{NAME} dlock:fence:{NAME}  readers, or a name's counter to pass
//   INCR dlock:fence-floor                         the token
//   GET NAME                                       the hold still this one, after the INCR
// Other connections' commands may run between them (a proxy's, a split write): the docs have
// why that is safe. Replies OK, 0, a count above 10^15 + 1 and this hold (either waiter flag)
// are the grant, the count its token (what acquire.lua's fast path replies). Anything else sends
// acquire.lua on the same connection, whose reply is the node's, told the release channel when
// the SET wrote (ARGV[9], ARGV[10]: refused by live readers, it takes this very hold back in the
// same script, and wakes whoever its key refused meanwhile; a separate release would run apart
// from the refusal, after a reissue even behind it, and could take away a key another vote of
// this attempt counts: the second review): SET nil (held, or this very hold met again), readers
// or a name's counter (acquire.lua refuses or grants this hold), a count at or below 10^15 + 1
// (the floor was lost: the INCR wrote 1, acquire.lua counts from the clock), the hold gone or
// replaced by the GET (its key deleted or expired between: acquire.lua grants afresh, with a
// token counted after whoever took the name meanwhile, or refuses), an error (OOM, READONLY, a
// command the ACL denies). The INCR of a refused attempt raises the floor by one: tokens need
// only grow. Keys 0 (NAME), 4 (readers), 1 (the name's counter), 2 (the floor); arguments 0
// (owner), 1 (hold id), 2 (ttl): acquire_call's layout.
constexpr std::string_view kHoldPrefix = "dlock. ";

void encode_native_acquire(const node::Call& call, std::string& out) {
  using resp::put;
  using resp::put_bytes;
  using resp::put_header;
  using resp::put_size;
  const std::string_view name = call.keys[0];
  const std::string_view owner = call.args[0];
  const std::string_view id = call.args[1];
  const std::size_t value = kHoldPrefix.size() + id.size() + 1 + owner.size();
  constexpr std::string_view kSet = "*6\r\n$3\r\nSET\r\n";
  constexpr std::string_view kNxPx = "$2\r\nNX\r\n$2\r\nPX\r\n";
  constexpr std::string_view kExists = "*3\r\n$6\r\nEXISTS\r\n";
  constexpr std::string_view kIncr = "*2\r\n$4\r\nINCR\r\n";
  constexpr std::string_view kGet = "*2\r\n$3\r\nGET\r\n";
  const std::size_t at = out.size();
  out.resize(at + kSet.size() + kNxPx.size() + kExists.size() + kIncr.size() + kGet.size() +
             2 * put_size(name) + put_size({}) + value + put_size(call.args[2]) +
             put_size(call.keys[4]) + put_size(call.keys[1]) + put_size(call.keys[2]));
  char* p = put_bytes(out.data() + at, kSet, false);
  p = put(p, name);
  // "dlock. HOLD_ID OWNER", one bulk string written in pieces.
  p = put_header(p, '$', value);
  p = put_bytes(p, kHoldPrefix, false);
  p = put_bytes(p, id, false);
  p = put_bytes(p, " ", false);
  p = put_bytes(p, owner);
  p = put_bytes(p, kNxPx, false);
  p = put(p, call.args[2]);
  p = put_bytes(p, kExists, false);
  p = put(p, call.keys[4]);
  p = put(p, call.keys[1]);
  p = put_bytes(p, kIncr, false);
  p = put(p, call.keys[2]);
  p = put_bytes(p, kGet, false);
  p = put(p, name);
  out.resize(static_cast<std::size_t>(p - out.data()));
}

// Whether `value` is the hold of `call`, with either waiter flag ("dlock. " or "dlock! ").
bool is_this_hold(const node::Call& call, const resp::Reply& value) {
  const std::string_view v = value.str;
  const std::string_view id = call.args[1];
  const std::string_view owner = call.args[0];
  const std::size_t n = kHoldPrefix.size();
  return value.type == resp::Reply::Type::string && v.size() == n + id.size() + 1 + owner.size() &&
         v.substr(0, 5) == "dlock" && (v[5] == '.' || v[5] == '!') && v[6] == ' ' &&
         v.substr(n, id.size()) == id && v[n + id.size()] == ' ' &&
         v.substr(n + id.size() + 1) == owner;
}

node::NativeReading read_native_acquire(const node::Call& call, resp::Reply& replies) {
  constexpr std::int64_t kCountsFrom = 1'000'000'000'000'001;  // 10^15 + 1: see acquire.lua
  if (replies.elements.size() != 4) return node::NativeReading::script;
  const resp::Reply& set = replies.elements[0];
  const resp::Reply& exists = replies.elements[1];
  const resp::Reply& counted = replies.elements[2];
  const bool wrote = set.type == resp::Reply::Type::status && set.str == "OK";
  if (!wrote) return node::NativeReading::script;
  if (!exists.is_integer() || exists.integer != 0 || !counted.is_integer() ||
      counted.integer <= kCountsFrom || !is_this_hold(call, replies.elements[3])) {
    return node::NativeReading::script_after;
  }
  const std::int64_t token = counted.integer;
  replies = resp::Reply{};
  replies.type = resp::Reply::Type::integer;
  replies.integer = token;
  return node::NativeReading::answered;
}

// acquire.lua after the native commands wrote: ARGV[8] '' (no semaphore slot has a native form),
// ARGV[9] the name's release channel, ARGV[10] the publish verb (a native form is never sent to
// a cluster's shard, which would need spublish).
node::Call acquire_after_native(const node::Call& call) {
  node::Call after = call;
  after.args.push_back("");
  push_key(after.args, kReleasePrefix, queued_as(std::string(call.keys[0])));
  after.args.push_back("publish");
  return after;
}

// The native form of an acquisition whose acquire.lua call would take the fast path as a whole
// (acquire_batch_form's conditions, and the node's counter), else none.
node::NativeForm native_acquire_form(const HoldId& hold, bool fair, WriterWait writer,
                                     bool slot_of_semaphore, TokenCounter counter) {
  if (hold.kind != HoldKind::write || fair || writer.registered || writer.waited ||
      slot_of_semaphore || counter != TokenCounter::node) {
    return {};
  }
  return node::NativeForm{&encode_native_acquire, 4, &read_native_acquire, &acquire_after_native};
}

// Holds per renew script call: bounds the time one call blocks a node.
constexpr std::size_t kRenewChunk = 256;

}  // namespace

std::vector<node::Call> renew_calls(const std::vector<Renewal>& renewals,
                                    const std::vector<std::size_t>& live,
                                    std::vector<RenewPlace>& places) {
  std::vector<node::Call> calls;
  struct Record {
    std::size_t entry = 0;  // its entry in the last call
    std::chrono::milliseconds ttl{0};
  };
  std::map<std::string, Record> records;  // record key -> where it is, the ttl it has
  std::size_t holds_in_call = 0;
  for (std::size_t j = 0; j < live.size(); ++j) {
    if (calls.empty() || holds_in_call == kRenewChunk) {
      calls.push_back(node::Call{&scripts::renew(), {}, {}});
      calls.back().args_per_key = 4;  // renew.lua: owner, hold id, ttl, kind per key
      records.clear();
      holds_in_call = 0;
    }
    node::Call& call = calls.back();
    const Renewal& r = renewals[live[j]];
    places[j] = RenewPlace{calls.size() - 1, call.keys.size()};
    ++holds_in_call;
    const std::string ttl = std::to_string(r.ttl.count());
    if (r.hold.kind == HoldKind::read) {
      push_key(call.keys, kReadersPrefix, r.hold.name);
    } else {
      call.keys.push_back(r.hold.name);
    }
    call.args.push_back(r.hold.owner.str());
    call.args.push_back(r.hold.id);
    call.args.push_back(ttl);
    call.args.push_back(kind_arg(r.hold.kind));
    std::string record = permit_record_key(r.hold.name);
    if (record.empty()) continue;
    const auto [at, added] = records.emplace(record, Record{call.keys.size(), r.ttl});
    if (added) {
      call.keys.push_back(record);
      call.args.push_back({});  // owner and hold id: none for a permit record
      call.args.push_back({});
      call.args.push_back(ttl);
      call.args.push_back("p");
    } else if (at->second.ttl < r.ttl) {
      at->second.ttl = r.ttl;
      call.args.replace(4 * at->second.entry + 2, ttl);
    }
  }
  return calls;
}

node::Call acquire_call(const HoldId& hold, std::chrono::milliseconds ttl,
                        const std::optional<FairTicket>& fair, WriterWait writer,
                        std::size_t permits, node::SharedText announcement, TokenCounter counter) {
  const std::string& name = hold.name;
  node::Call call;
  call.keys = keys_for(name);
  call.args = args_for(hold);
  node::Strings& keys = call.keys;
  node::Strings& args = call.args;
  keys.push_back(name);
  push_key(keys, kFencePrefix, name);
  if (!fair) {
    call.script = &scripts::acquire();
    keys.push_back(kFenceFloorKey);
    keys.push_back(kMaxTtlKey);
    call.node_keys = key_bit(2) | key_bit(3);
  } else {
    // Fair mode is for write holds only (the client refuses fair read holds).
    call.script = &scripts::fair_acquire();
    push_key(keys, kQueuePrefix, queued_as(name));
    push_key(keys, kQueueAlivePrefix, queued_as(name));
    keys.push_back(kFenceFloorKey);
    keys.push_back(kMaxTtlKey);
    call.node_keys = key_bit(4) | key_bit(5);
  }
  push_key(keys, kReadersPrefix, name);
  push_key(keys, kWritersWaitingPrefix, name);
  args.push_back(hold.owner.str());
  args.push_back(hold.id);
  args.push_back(std::to_string(ttl.count()));
  if (!fair) {
    args.push_back(kind_arg(hold.kind));
    args.push_back(std::to_string(writer.register_for.count()));
    args.push_back(writer.registered || writer.waited ? "1" : "0");
    args.push_back(counter == TokenCounter::node ? "n" : "");
    // ARGV[7] 'nr' / 'r': the same count, the record of the ttl known to cover the lease.
    call.record_known_arg = args.size() - 1;
    call.record_known_value = counter == TokenCounter::node ? "nr" : "r";
  } else {
    args.push_back(std::to_string(fair->arrival_ms));
    args.push_back(std::to_string(fair->waiter_timeout.count()));
    args.push_back(fair->enqueue ? "1" : "0");
  }
  // A semaphore's slot: its permit record, and the count this client uses.
  const auto semaphore = semaphore_of_slot(name);
  if (permits > 0 && !semaphore.empty()) {
    push_key(keys, kPermitsPrefix, semaphore);
    args.push_back(std::to_string(permits));
  }
  call.batch = acquire_batch_form(hold, fair.has_value(), writer, !semaphore.empty());
  call.native = native_acquire_form(hold, fair.has_value(), writer, !semaphore.empty(), counter);
  call.announcement = std::move(announcement);
  call.record_ttl = ttl;
  call.record_call = &announced_ttl_call;
  call.granted = &acquire_granted;
  return call;
}

bool acquire_granted(const resp::Reply& reply) {
  // The same reading as the tally's, so that a node records exactly the grants that count.
  return parse_acquire(Result<resp::Reply>(reply)).kind == AcquireReply::Kind::granted;
}

node::Call announced_ttl_call(std::chrono::milliseconds ttl, const std::string& announcement) {
  std::string member = std::to_string(ttl.count());
  if (!announcement.empty()) member += "." + announcement;
  node::Call call{&scripts::max_ttl_raise(),
                  {kMaxTtlKey},
                  {std::move(member), std::to_string(2 * ttl.count())}};
  call.node_keys = key_bit(0);
  return call;
}

node::Call release_call(const HoldId& hold) {
  const std::string& name = hold.name;
  node::Call call{&scripts::release(), keys_for(name), args_for(hold)};
  call.keys.push_back(name);
  push_key(call.keys, kQueuePrefix, queued_as(name));
  push_key(call.keys, kQueueAlivePrefix, queued_as(name));
  push_key(call.keys, kReadersPrefix, name);
  call.args.push_back(hold.owner.str());
  push_key(call.args, kReleasePrefix, queued_as(name));
  call.args.push_back(hold.id);
  call.args.push_back(kind_arg(hold.kind));
  // A semaphore's slot: its permit is counted off the record (deleted with the last one).
  if (const auto semaphore = semaphore_of_slot(name); !semaphore.empty()) {
    push_key(call.keys, kPermitsPrefix, semaphore);
  } else if (hold.kind == HoldKind::write && !hold.id.empty()) {
    // Group commit (docs/protocol.md): release_batch.lua frees a write hold by its id, or
    // leaves it to this call when somebody was refused by it. Its item: NAME; owner, channel,
    // hold id.
    call.batch = node::BatchForm{&scripts::release_batch(), key_bit(0),
                                 key_bit(0) | key_bit(1) | key_bit(2), 0};
  }
  return call;
}

node::Call fair_leave_call(const std::string& name, const OwnerToken& owner) {
  return node::Call{
      &scripts::fair_leave(),
      {name, queue_key(name), queue_alive_key(name), writers_waiting_key(name)},
      {owner.str(), release_channel(name), semaphore_of_slot(name).empty() ? "" : "s"}};
}

node::Call fence_raise_call(const HoldId& hold, std::uint64_t token,
                            std::chrono::milliseconds ttl) {
  const std::string& name = hold.name;
  node::Call call{
      &scripts::fence_raise(),
      {fence_key(name), kFenceFloorKey, hold.kind == HoldKind::read ? readers_key(name) : name},
      {std::to_string(token), std::to_string(ttl.count()), hold.owner.str(), hold.id,
       kind_arg(hold.kind)}};
  call.node_keys = key_bit(1);
  return call;
}

node::Call max_ttl_raise_call(std::chrono::milliseconds ttl) {
  // The bare member for twice the ttl, as a grant's record: a node that confirms it on the
  // replicas caches it for as long as that lives (node/replica_confirm.h).
  node::Call call = announced_ttl_call(ttl, std::string());
  call.record_ttl = ttl;
  call.record_call = &announced_ttl_call;
  call.granted = &ttl_recorded;
  call.records_itself = true;
  return call;
}

bool ttl_recorded(const resp::Reply& reply) {
  return reply.is_integer();
}

node::Call max_ttl_retract_call(std::vector<std::string> members) {
  node::Call call{&scripts::max_ttl_retract(), {kMaxTtlKey}, std::move(members)};
  call.node_keys = key_bit(0);
  return call;
}

node::Call hello_call(std::vector<std::string> args) {
  node::Call call{
      &scripts::hello(), {kBootsKey, kMaxTtlKey, std::string(kFenceFloorKey)}, std::move(args)};
  call.node_keys = key_bit(0) | key_bit(1) | key_bit(2);
  return call;
}

node::Call floor_raise_call(std::uint64_t floor) {
  node::Call call{&scripts::floor_raise(), {std::string(kFenceFloorKey)}, {std::to_string(floor)}};
  call.node_keys = key_bit(0);
  return call;
}

node::Call inspect_call(const std::string& name) {
  node::Call call{&scripts::inspect(),
                  {name, fence_key(name), queue_key(name), std::string(kFenceFloorKey),
                   readers_key(name), writers_waiting_key(name)},
                  {}};
  call.node_keys = key_bit(3);
  return call;
}

node::Call force_release_call(const std::string& name, bool include_foreign) {
  return node::Call{&scripts::force_release(),
                    {name, queue_key(name), readers_key(name), writers_waiting_key(name)},
                    {release_channel(name), include_foreign ? "1" : "0"}};
}

node::Call semaphore_resize_call(const std::string& name, std::size_t permits,
                                 std::size_t check_from, std::size_t max_permits) {
  node::Call call{&scripts::semaphore_resize(),
                  {permit_record_key(semaphore_slot(name, 0))},
                  {std::to_string(permits)}};
  for (std::size_t i = check_from; i < max_permits; ++i) {
    call.keys.push_back(semaphore_slot(name, i));
  }
  return call;
}

}  // namespace dlock::lock

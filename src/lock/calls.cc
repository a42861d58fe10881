// SPDX-License-Identifier: MIT
#include "lock/calls.h"

#include <map>

#include "lock/keys.h"
#include "scripts/script.h"

namespace dlock::lock {
namespace {

// Bit i: keys[i] is a node key (node::Call::node_keys).
constexpr std::uint32_t key_bit(std::size_t i) {
  return std::uint32_t{1} << i;
}

// The strings of a call's keys or arguments, each moved in (or built in place from a view or a
// literal). Not std::vector<std::string>{...}: an initializer_list is copied from, every string
// once more.
template <typename... S>
std::vector<std::string> strings(S&&... s) {
  std::vector<std::string> out;
  out.reserve(sizeof...(s));
  (out.emplace_back(std::forward<S>(s)), ...);
  return out;
}

// Holds per renew script call: bounds the time one call blocks a node.
constexpr std::size_t kRenewChunk = 256;

}  // namespace

std::vector<node::Call> renew_calls(const std::vector<Renewal>& renewals,
                                    const std::vector<std::size_t>& live,
                                    std::vector<RenewPlace>& places) {
  std::vector<node::Call> calls;
  std::map<std::string, std::size_t> records;  // record key -> its entry in the last call
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
    call.keys.push_back(r.hold.kind == HoldKind::read ? readers_key(r.hold.name) : r.hold.name);
    call.args.insert(call.args.end(), {r.hold.owner.str(), r.hold.id, std::to_string(r.ttl.count()),
                                       kind_arg(r.hold.kind)});
    std::string record = permit_record_key(r.hold.name);
    if (record.empty()) continue;
    const auto [at, added] = records.emplace(record, call.keys.size());
    if (added) {
      call.keys.push_back(std::move(record));
      call.args.insert(call.args.end(), {"", "", std::to_string(r.ttl.count()), "p"});
    } else {
      std::string& ttl = call.args[4 * at->second + 2];
      if (std::stoll(ttl) < r.ttl.count()) ttl = std::to_string(r.ttl.count());
    }
  }
  return calls;
}

node::Call acquire_call(const HoldId& hold, std::chrono::milliseconds ttl,
                        const std::optional<FairTicket>& fair, WriterWait writer,
                        std::size_t permits, std::string announcement, TokenCounter counter) {
  const std::string& name = hold.name;
  node::Call call;
  if (!fair) {
    call = node::Call{
        &scripts::acquire(),
        strings(name, fence_key(name), kFenceFloorKey, kMaxTtlKey, readers_key(name),
                writers_waiting_key(name)),
        strings(hold.owner.str(), hold.id, std::to_string(ttl.count()), kind_arg(hold.kind),
                std::to_string(writer.register_for.count()), writer.registered ? "1" : "0",
                counter == TokenCounter::node ? "n" : "")};
    call.node_keys = key_bit(2) | key_bit(3);
  } else {
    // Fair mode is for write holds only (the client refuses fair read holds).
    call = node::Call{
        &scripts::fair_acquire(),
        strings(name, fence_key(name), queue_key(name), queue_alive_key(name), kFenceFloorKey,
                kMaxTtlKey, readers_key(name), writers_waiting_key(name)),
        strings(hold.owner.str(), hold.id, std::to_string(ttl.count()),
                std::to_string(fair->arrival_ms), std::to_string(fair->waiter_timeout.count()),
                fair->enqueue ? "1" : "0")};
    call.node_keys = key_bit(4) | key_bit(5);
  }
  // A semaphore's slot: its permit record, and the count this client uses.
  if (std::string record = permit_record_key(name); permits > 0 && !record.empty()) {
    call.keys.push_back(std::move(record));
    call.args.push_back(std::to_string(permits));
  }
  call.announcement = std::move(announcement);
  call.record_ttl = ttl;
  call.record_call = &announced_ttl_call;
  return call;
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
  node::Call call{&scripts::release(),
                  strings(name, queue_key(name), queue_alive_key(name), readers_key(name)),
                  strings(hold.owner.str(), release_channel(name), hold.id, kind_arg(hold.kind))};
  // A semaphore's slot: its permit is counted off the record (deleted with the last one).
  if (std::string record = permit_record_key(name); !record.empty()) {
    call.keys.push_back(std::move(record));
  }
  return call;
}

node::Call fair_leave_call(const std::string& name, const OwnerToken& owner) {
  return node::Call{&scripts::fair_leave(),
                    {name, queue_key(name), queue_alive_key(name), writers_waiting_key(name)},
                    {owner.str(), release_channel(name)}};
}

node::Call fence_raise_call(const HoldId& hold, std::uint64_t token,
                            std::chrono::milliseconds ttl) {
  const std::string& name = hold.name;
  node::Call call{&scripts::fence_raise(),
                  strings(fence_key(name), kFenceFloorKey,
                          hold.kind == HoldKind::read ? readers_key(name) : name),
                  strings(std::to_string(token), std::to_string(ttl.count()), hold.owner.str(),
                          hold.id, kind_arg(hold.kind))};
  call.node_keys = key_bit(1);
  return call;
}

node::Call max_ttl_raise_call(std::chrono::milliseconds ttl) {
  node::Call call{&scripts::max_ttl_raise(),
                  {kMaxTtlKey},
                  {std::to_string(ttl.count()), std::to_string(ttl.count())}};
  call.node_keys = key_bit(0);
  return call;
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

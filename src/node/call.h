// SPDX-License-Identifier: MIT
// Call and Enough: what NodeSet::run sends to every node, and when it may stop waiting.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "node/strings.h"
#include "resp/reply.h"
#include "scripts/script.h"

namespace dlock::node {

// Text shared with the record it comes from, read-only: a call carries its announcement's
// digits without a copy of its own (an allocation per acquisition, issue 32). Made from a
// std::string (tests, hand-built calls) it holds a copy.
class SharedText {
 public:
  SharedText() = default;
  SharedText(std::string text)  // NOLINT(google-explicit-constructor)
      : text_(std::make_shared<const std::string>(std::move(text))) {}
  SharedText(const char* text) : SharedText(std::string(text)) {}  // NOLINT
  explicit SharedText(std::shared_ptr<const std::string> text) : text_(std::move(text)) {}
  const std::string& str() const {
    static const std::string empty;
    return text_ ? *text_ : empty;
  }
  friend bool operator==(const SharedText& a, std::string_view b) { return a.str() == b; }

 private:
  std::shared_ptr<const std::string> text_;
};

// A call's batch form (group commit, docs/protocol.md): the same request as an item of a batch
// script, which runs many such items in one call on a server and replies an array with each
// item's reply in its place: the reply the call's own script would have given, or nil for
// "nothing changed here, send the call itself". The item's keys and arguments are chosen from
// the call's own (bit i: keys[i] or args[i], in order), so a batch form costs no copy; the
// node keys once per batch call, before every item's keys.
struct BatchForm {
  const scripts::Script* script = nullptr;  // null: the call is never batched
  std::uint32_t item_keys = 0;
  std::uint32_t item_args = 0;
  std::uint32_t node_keys = 0;
};

struct Call;

// What a native form's replies say (NativeForm::read).
enum class NativeReading {
  answered,      // the replies were made the script's reply
  script,        // send the script
  script_after,  // send NativeForm::after's call (the script, told what the commands wrote)
};

// A call's native form (docs/protocol.md, "The native acquisition"): plain commands that do
// what the script's fast path does, written together in its place where a server node would
// send the script with its record_known_value (its check of the record skipped), with the
// reading of their replies. Whatever the reading cannot answer (a held key, readers, a counter
// that counts nothing, a refused command) goes to the script on the same connection, whose reply
// is then the call's: the call itself, or where the commands wrote what the script must know of
// (NativeReading::script_after), the form's `after` call. Never on a cluster's shard or a
// Sentinel-managed master (no record window), nor with the replica guard or ASKING.
struct NativeForm {
  // Appends the commands' RESP encoding to `out`; `replies` of them.
  void (*encode)(const Call& call, std::string& out) = nullptr;
  std::uint32_t replies = 0;
  // Reads `replies`, the array of the commands' replies in order, for `call`.
  NativeReading (*read)(const Call& call, resp::Reply& replies) = nullptr;
  // The script's call after commands that wrote (NativeReading::script_after): the call with
  // what the script needs to take their writes back where it refuses.
  Call (*after)(const Call& call) = nullptr;
};

// One request, sent to every node: a script call, or a plain command when script is null.
struct Call {
  const scripts::Script* script = nullptr;
  Strings keys;  // script keys, or the command and its arguments
  Strings args;  // script arguments
  // The replica guard: after a script that did not fail, WAIT min_replicas replica_timeout on
  // the same connection (so it covers the script's writes); fewer confirmations turn the reply
  // into the error "REPLICAS ...". The node's answer then waits up to replica_timeout longer.
  std::size_t min_replicas = 0;
  std::chrono::milliseconds replica_timeout{0};
  // An acquisition: the digits of the announcement it is made under (lock::Membership). A
  // cluster node that records the ttl in its greeting's record first does so under them
  // ("<ttl>.<digits>", max_ttl_raise.lua), so that the client's retraction takes it back.
  SharedText announcement{};
  // Routing facts, set by the call's builder (lock/quorum_lock.cc) so that a node routes
  // without reading the script or its arguments. record_ttl: an acquisition, whose ttl a
  // cluster node records in its greeting's record before sending it (max_ttl_raise.lua).
  // args_per_key: a call that may be split by key (one call per slot, or per key while a slot
  // migrates); KEYS[i] goes with ARGV[n*(i-1)+1 .. n*i]. 0: not splittable.
  std::optional<std::chrono::milliseconds> record_ttl{};
  std::size_t args_per_key = 0;
  // Keys that exist once per node, not once per lock name: bit i set for keys[i]. A cluster
  // node keeps one of each per slot, names the one of the slot it sends the call to, and
  // chooses that slot by the other keys alone.
  std::uint32_t node_keys = 0;
  // With record_ttl: how to build the call that records it (the lock layer's builder), run by a
  // cluster node in its home slot before the acquisition, under the call's announcement.
  Call (*record_call)(std::chrono::milliseconds ttl, const std::string& announcement) = nullptr;
  // With record_ttl: whether a reply to the acquisition is a grant (the lock layer's reading).
  // A cluster node then records the bare ttl (record_call with no announcement, which no
  // retraction takes back) in its home slot before it hands the grant on, as acquire.lua does
  // in the lock's own slot: the lease is then known where greetings look after the client took
  // its announcements back (a refused larger ttl), for as long as it may live.
  bool (*granted)(const resp::Reply& reply) = nullptr;
  // With record_ttl: the call is itself a record of that ttl (a renewal round's max_ttl_raise),
  // which must reach the replicas like a grant's record where one master holds the locks' keys
  // and the record (a lossy failover would lose them together): a cluster node raises nothing
  // before sending it, and its reply, if Call::granted, is confirmed like a grant.
  bool records_itself = false;
  // With record_ttl and granted: the argument args[record_known_arg] that a server node sends as
  // record_known_value instead when it knows its server's record of lease ttls reaches past
  // any lease this call may grant (node/record_window.h), so that the script skips its check
  // of the record; and a promise of the script: a grant (Call::granted) of the call sent as
  // built leaves that record reaching at least 1.5 record_ttl past the moment the script ran.
  // npos: no such argument.
  // record_drift: how fast a server's clock may run against this client's (the lock's drift
  // factor), taken off what the record is known to reach.
  std::size_t record_known_arg = std::string_view::npos;
  std::string_view record_known_value{};
  double record_drift = 0.01;
  // How a server node may send this call in one batch call with others queued for it at the
  // same time (node/coalescer.h). Never by a cluster, nor on a borrowed connection.
  BatchForm batch{};
  // How a server node may send this call as plain commands instead (NativeForm).
  NativeForm native{};

  bool is_node_key(std::size_t i) const { return i < 32 && (node_keys >> i & 1U) != 0; }
};

// True if `call` is the plain command `verb` (upper case), in any case.
inline bool is_command(const Call& call, std::string_view verb) {
  if (call.script != nullptr || call.keys.empty()) return false;
  const std::string_view first = call.keys[0];
  return std::equal(first.begin(), first.end(), verb.begin(), verb.end(),
                    [](char a, char b) { return (a >= 'a' && a <= 'z' ? a - 32 : a) == b; });
}

// Return-at-quorum for a single call: once `needed` nodes answered with a reply for which
// `counts(node, reply)` is true, run() returns without waiting for the others; their outcome
// is errc::cancelled ("not waited for"), and their replies are read and dropped later. Empty
// (needed == 0): wait for every node or the deadline.
struct Enough {
  std::size_t needed = 0;
  std::function<bool(std::size_t node, const resp::Reply&)> counts;
  bool reached(std::size_t yes) const { return needed > 0 && yes >= needed; }
};

}  // namespace dlock::node

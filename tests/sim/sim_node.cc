// SPDX-License-Identifier: MIT
#include "sim/sim_node.h"

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>

#include "lock/keys.h"

namespace dlock::sim {
namespace {

resp::Reply integer(std::int64_t n) {
  resp::Reply r;
  r.type = resp::Reply::Type::integer;
  r.integer = n;
  return r;
}

resp::Reply array(const std::vector<std::int64_t>& items) {
  resp::Reply r;
  r.type = resp::Reply::Type::array;
  for (const auto n : items) r.elements.push_back(integer(n));
  return r;
}

resp::Reply error(std::string text) {
  resp::Reply r;
  r.type = resp::Reply::Type::error;
  r.str = std::move(text);
  return r;
}

// Lua's tonumber() on the digits the scripts store: every value here is an integer.
std::int64_t number(const std::string& text) {
  std::size_t used = 0;
  const std::int64_t n = std::stoll(text, &used);
  if (used != text.size()) throw std::logic_error("not a number: " + text);
  return n;
}

bool digit(char c) {
  return c >= '0' && c <= '9';
}

// string.match(s, '^(%d+)'): the digits s starts with.
std::optional<std::int64_t> leading_number(const std::string& s) {
  std::size_t n = 0;
  while (n < s.size() && digit(s[n])) ++n;
  if (n == 0) return std::nullopt;
  return number(s.substr(0, n));
}

// string.match(s, ' (%d+)$'): the digits s ends with, after a space.
std::optional<std::int64_t> trailing_number(const std::string& s) {
  std::size_t from = s.size();
  while (from > 0 && digit(s[from - 1])) --from;
  if (from == s.size() || from == 0 || s[from - 1] != ' ') return std::nullopt;
  return number(s.substr(from));
}

// hello.lua's ttl_of(): a dlock:max-ttl member's whole part ("300" and "300.<digits>": 300).
std::int64_t ttl_part(const std::string& member) {
  const auto dot = member.find('.');
  return number(dot == std::string::npos ? member : member.substr(0, dot));
}

std::string at(const node::Strings& v, std::size_t i) {
  if (i >= v.size()) throw std::logic_error("script called with too few keys or arguments");
  return std::string(v[i]);
}

}  // namespace

SimNode::SimNode(NodeClock clock, std::string run_id, Mutation mutation)
    : clock_(clock),
      mutation_(mutation),
      run_id_(std::move(run_id)),
      replid_("r" + run_id_),
      boot_ms_(clock_.now_ms()),
      replica_boot_ms_(boot_ms_ - 3'600'000) {}

std::int64_t SimNode::ttl_of(const std::string& arg) const {
  return number(arg) * (mutation_ == Mutation::triple_ttl ? 3 : 1);
}

void SimNode::restart(std::string run_id) {
  store_.clear();
  replica_.clear();
  replid_ = "r" + run_id;
  run_id_ = std::move(run_id);
  promoted_ = false;
  boot_ms_ = clock_.now_ms();
  ++generation_;
}

void SimNode::fail_over(std::string run_id, std::string replid) {
  store_ = replica_;
  run_id_ = std::move(run_id);
  replid_ = std::move(replid);
  promoted_ = true;
  boot_ms_ = replica_boot_ms_;
  // The old master, back as a replica, resyncs in full from the new one.
  replica_ = store_;
  ++generation_;
}

std::string SimNode::evict(std::size_t pick) {
  std::vector<std::string> volatile_keys;
  for (const auto& [key, entry] : store_.live(now_ms())) {
    if (entry.expire_at) volatile_keys.push_back(key);
  }
  if (volatile_keys.empty()) return "";
  const std::string key = volatile_keys[pick % volatile_keys.size()];
  store_.del(key);
  return key;
}

void SimNode::replace(std::string run_id, std::int64_t uptime_ms) {
  restart(std::move(run_id));
  boot_ms_ = clock_.now_ms() - uptime_ms;
}

void SimNode::swap_server(Server& other) {
  std::swap(run_id_, other.run_id);
  std::swap(boot_ms_, other.boot_ms);
  std::swap(store_, other.store);
  ++generation_;
}

resp::Reply SimNode::execute(const node::Call& call) {
  // One reading of the clock per call: Redis freezes time while a script runs.
  const std::int64_t now = clock_.now_ms();
  if (call.script) {
    resp::Reply r = run_script(call, now);
    const std::string_view name = call.script->name;
    if (name == "acquire" && r.is_integer()) grants_.push_back({r.integer, generation_});
    if (name == "acquire_batch") {
      for (const auto& e : r.elements) {
        if (e.is_integer()) grants_.push_back({e.integer, generation_});
      }
    }
    return r;
  }
  if (call.keys.size() == 1 && at(call.keys, 0) == "INFO") {
    return info(now);
  }
  return error("ERR sim: command not modelled");
}

resp::Reply SimNode::command(const resp::Reply& command) {
  const std::int64_t now = clock_.now_ms();
  std::vector<std::string> argv;
  for (const auto& e : command.elements) argv.push_back(e.str);
  if (argv.size() == 6 && argv[0] == "SET" && argv[3] == "NX" && argv[4] == "PX") {
    // "dlock. HOLD_ID OWNER": the model keeps a hold as the hash owner -> hold id.
    constexpr std::string_view kPrefix = "dlock. ";
    const std::string& value = argv[2];
    const auto space = value.find(' ', kPrefix.size());
    if (value.rfind(kPrefix, 0) != 0 || space == std::string::npos) {
      throw std::logic_error("sim: a native SET of no dlock hold: " + value);
    }
    const std::string hold = value.substr(kPrefix.size(), space - kPrefix.size());
    const std::string owner = value.substr(space + 1);
    if (store_.exists(argv[1], now) && mutation_ != Mutation::native_set_without_nx) {
      return resp::Reply{};  // nil: not written
    }
    store_.del(argv[1]);
    store_.hset(argv[1], owner, hold, now);
    store_.pexpire(argv[1], ttl_of(argv[5]), now);
    resp::Reply ok;
    ok.type = resp::Reply::Type::status;
    ok.str = "OK";
    return ok;
  }
  if (!argv.empty() && argv[0] == "EXISTS") {
    std::int64_t n = 0;
    for (std::size_t k = 1; k < argv.size(); ++k) n += store_.exists(argv[k], now) ? 1 : 0;
    return integer(n);
  }
  if (argv.size() == 2 && argv[0] == "INCR") {
    const auto v = store_.get(argv[1], now);
    const std::int64_t next = (v ? number(*v) : 0) + 1;
    // INCR keeps the key's ttl.
    const std::int64_t left = store_.pttl(argv[1], now);
    store_.set(argv[1], std::to_string(next), left > 0 ? std::optional(left) : std::nullopt, now);
    return integer(next);
  }
  if (argv.size() == 2 && argv[0] == "GET") {
    // The model's hold (owner -> hold id) read back as the string key "dlock. HOLD_ID OWNER"
    // (the waiter flag is not modelled); nil when absent.
    if (!store_.exists(argv[1], now)) return resp::Reply{};
    const Hash hold = store_.hgetall(argv[1], now);
    if (hold.size() != 1) return error("WRONGTYPE sim: not one hold");
    resp::Reply value;
    value.type = resp::Reply::Type::string;
    value.str = "dlock. " + hold.begin()->second + " " + hold.begin()->first;
    return value;
  }
  return error("ERR sim: command not modelled");
}

void SimNode::native_granted(std::int64_t token, std::size_t at) {
  grants_.insert(grants_.begin() + static_cast<std::ptrdiff_t>(std::min(at, grants_.size())),
                 Grant{token, generation_});
  ++records_skipped_;
}

resp::Reply SimNode::run_script(const node::Call& call, std::int64_t now) {
  const std::string_view name = call.script->name;
  if (name == "acquire") return acquire(call, now);
  if (name == "release") return release(call, now);
  if (name == "acquire_batch") return acquire_batch(call, now);
  if (name == "release_batch") return release_batch(call, now);
  if (name == "renew") return renew(call, now);
  if (name == "fence_raise") return fence_raise(call, now);
  if (name == "hello") return hello(call, now);
  if (name == "floor_raise") return floor_raise(call, now);
  if (name == "force_release") return force_release(call, now);
  if (name == "max_ttl_raise") {
    const std::int64_t ttl = ttl_part(at(call.args, 0));
    record_ttl(at(call.keys, 0), at(call.args, 0), number(at(call.args, 1)), now);
    return integer(std::max(ttl, live_max_ttl(at(call.keys, 0), now)));
  }
  if (name == "max_ttl_retract") {
    // Every announcement "<ttl>.<id>" whose id is named; never a bare ttl.
    std::int64_t removed = 0;
    for (const auto& [member, until] : store_.hgetall(at(call.keys, 0), now)) {
      const auto dot = member.find('.');
      if (dot == std::string::npos) continue;
      const std::string id = member.substr(dot + 1);
      if (std::find(call.args.begin(), call.args.end(), id) == call.args.end()) continue;
      store_.hdel(at(call.keys, 0), member, now);
      ++removed;
    }
    return integer(removed);
  }
  return error("ERR sim: script " + std::string(name) + " not modelled");
}

resp::Reply SimNode::info(std::int64_t now) const {
  resp::Reply r;
  r.type = resp::Reply::Type::string;
  r.str = "# Server\r\nredis_version:7.0.0\r\nrun_id:" + run_id_ +
          "\r\nuptime_in_seconds:" + std::to_string((now - boot_ms_) / 1000) +
          "\r\n# Replication\r\nrole:master\r\nmaster_replid:" + replid_ +
          "\r\nsecond_repl_offset:" +
          (promoted_ && mutation_ != Mutation::promotion_unnoticed ? "1" : "-1") + "\r\n";
  if (evicting_ && mutation_ != Mutation::eviction_unreported) {
    r.str += "# Memory\r\nmaxmemory:1000000\r\nmaxmemory_policy:volatile-lru\r\n";
  }
  return r;
}

std::optional<std::int64_t> SimNode::count_of(const std::string& key, std::int64_t now) {
  const auto v = store_.get(key, now);
  if (!v || number(*v) <= kLeastCount) return std::nullopt;
  return number(*v);
}

std::int64_t SimNode::counter(const std::string& fence, const std::string& floor,
                              std::int64_t now) {
  // count_of(GET KEYS[2]) or count_of(GET KEYS[3]) or the clock
  if (auto v = count_of(fence, now)) return *v;
  if (auto v = count_of(floor, now)) return *v;
  return now * 1000;  // acquire.lua: the server's clock in microseconds
}

// acquire.lua's fast path for a free key: a write hold (ARGV[4] 'w'), no waiter's grant
// (ARGV[6] not '1'), no semaphore slot (KEYS[7]), no readers (not simulated) and, with the
// node's counter, no name counter (KEYS[2]). It returns at once, without the record's check,
// when the client says its record window covers the lease (ARGV[7] 'nr' or 'r') and it counted
// the token itself: by the node's counter an INCR of a floor above kLeastCount, by the name's
// its counter or else the floor, above kLeastCount. Anything else goes on to next_token() and
// record_ttl().
bool SimNode::fast_path_skips_record(const node::Call& call, std::int64_t now) {
  const std::string& counter_arg = at(call.args, 6);
  if ((counter_arg != "nr" && counter_arg != "r") || at(call.args, 3) != "w" ||
      at(call.args, 5) == "1" || call.keys.size() > 6) {
    return false;
  }
  const std::string& fence = at(call.keys, 1);
  const auto floor = store_.get(at(call.keys, 2), now);
  if (counter_arg == "nr") {
    return !store_.exists(fence, now) && floor && number(*floor) > kLeastCount;
  }
  // acquire.lua: the name's counter, else the floor, counted if above kLeastCount.
  const auto named = store_.get(fence, now);
  const auto known = named ? named : floor;
  return known && number(*known) > kLeastCount;
}

std::int64_t SimNode::next_token(const node::Call& call, std::int64_t ttl, std::int64_t now,
                                 bool record) {
  const std::string& fence = at(call.keys, 1);
  const std::string& floor = at(call.keys, 2);
  const std::string& max_ttl = at(call.keys, 3);
  const std::int64_t step = mutation_ == Mutation::no_fence_increment ? 0 : 1;
  std::int64_t token = 0;
  if (at(call.args, 6) == "n" || at(call.args, 6) == "nr") {
    // ARGV[7] 'n': the node's counter; the name's is taken away (GETDEL) and passed if ahead.
    // ('nr' and 'r', sent by a client whose record window covers the lease, skip only the fast
    // path's check of the record: fast_path_skips_record().)
    const auto named = store_.get(fence, now);
    store_.del(fence);
    token = node_token(floor, named ? std::optional(number(*named)) : std::nullopt, step, now);
  } else {
    token = counter(fence, floor, now) + step;
    store_.set(fence, std::to_string(token), ttl, now);
    raise_floor(floor, token, now);
  }
  if (record) record_granted_ttl(max_ttl, ttl, now);
  return token;
}

// acquire.lua's raise_floor(): a floor above kLeastCount follows a token above it; one that
// counts nothing is written at least the clock.
void SimNode::raise_floor(const std::string& floor, std::int64_t token, std::int64_t now) {
  const auto f = count_of(floor, now);
  if (!f) {
    store_.set(floor, std::to_string(std::max(token, now * 1000)), std::nullopt, now);
  } else if (token > *f) {
    store_.set(floor, std::to_string(token), std::nullopt, now);
  }
}

std::int64_t SimNode::node_token(const std::string& floor, std::optional<std::int64_t> named,
                                 std::int64_t step, std::int64_t now) {
  const auto f = store_.get(floor, now);
  const std::int64_t base = f ? number(*f) : 0;
  // A floor of kLeastCount or less before the INCR: the clock.
  std::int64_t token = (base <= kLeastCount ? now * 1000 : base) + step;
  if (named && token <= *named) token = *named + step;
  store_.set(floor, std::to_string(token), std::nullopt, now);
  return token;
}

// acquire.lua's record_ttl(): nothing when dlock:max-ttl (KEYS[4]) already holds `ttl` until
// at least now + 1.5 ttl (rounded down), else until now + 2 ttl.
void SimNode::record_granted_ttl(const std::string& max_ttl, std::int64_t ttl, std::int64_t now) {
  const std::string member = std::to_string(ttl);
  const HGet entry = store_.hget(max_ttl, member, now);
  if (entry.kind == HGet::Kind::value && number(entry.value) >= now + ttl + ttl / 2) return;
  record_ttl(max_ttl, member, 2 * ttl, now);
}

// The zset member -> until of the scripts, as a hash here: ZADD GT keeps the later until. A
// member is a ttl (grants, renewals) or an announcement "ttl.<digits>" (hello).
void SimNode::record_ttl(const std::string& key, const std::string& member, std::int64_t live,
                         std::int64_t now) {
  const HGet entry = store_.hget(key, member, now);
  const std::int64_t until = now + live;
  if (entry.kind != HGet::Kind::value || number(entry.value) < until) {
    store_.hset(key, member, std::to_string(until), now);
  }
}

std::int64_t SimNode::live_max_ttl(const std::string& key, std::int64_t now) {
  std::int64_t largest = 0;
  for (const auto& [member, until] : store_.hgetall(key, now)) {
    if (number(until) > now) largest = std::max(largest, ttl_part(member));
  }
  return largest;
}

// string.match(id, '^(.*)%.(%d+)$') on both, as acquire.lua does.
bool SimNode::older_hold_of_same_client(const std::string& id, const std::string& mine) {
  const auto split = [](const std::string& s) -> std::optional<std::pair<std::string, double>> {
    const auto dot = s.rfind('.');
    if (dot == std::string::npos || dot + 1 == s.size()) return std::nullopt;
    const std::string digits = s.substr(dot + 1);
    if (digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::pair{s.substr(0, dot), std::stod(digits)};
  };
  const auto a = split(id);
  const auto b = split(mine);
  return a && b && a->first == b->first && a->second <= b->second;  // acquire.lua: <=
}

resp::Reply SimNode::acquire(const node::Call& call, std::int64_t now) {
  const std::string& key = at(call.keys, 0);
  const std::string& fence = at(call.keys, 1);
  const std::string& floor = at(call.keys, 2);
  const std::string& owner = at(call.args, 0);
  const std::string& hold = at(call.args, 1);
  const std::int64_t ttl = ttl_of(at(call.args, 2));
  // KEYS[7], ARGV[8]: a semaphore slot's permit record and the count this client uses. Another
  // count recorded here refuses, and nothing changes.
  const std::string record_key = call.keys.size() > 6 ? at(call.keys, 6) : std::string();
  const std::string* record = call.keys.size() > 6 ? &record_key : nullptr;
  if (record && mutation_ != Mutation::ignore_permit_count) {
    const HGet n = store_.hget(*record, "n", now);
    if (n.kind == HGet::Kind::value && n.value != at(call.args, 7)) {
      return array({-1, counter(fence, floor, now), number(n.value)});
    }
  }
  if (mutation_ == Mutation::grant_when_held) store_.del(key);
  if (!store_.exists(key, now)) {
    // acquire.lua's fast path, before the hold is written: with ARGV[7] 'nr' or 'r' it leaves
    // the max-ttl record alone when it counts the token itself.
    const bool skip_record = fast_path_skips_record(call, now);
    if (skip_record) ++records_skipped_;
    store_.hset(key, owner, hold, now);
    store_.pexpire(key, ttl, now);
    if (record) count_permit(*record, at(call.args, 7), key, 1, now);
    return integer(next_token(call, ttl, now, !skip_record));
  }
  // An older hold of the same client is stale and taken over; any other hold of the owner is
  // held. A ttl is never shortened.
  const HGet mine = store_.hget(key, owner, now);
  if (mine.kind == HGet::Kind::value && older_hold_of_same_client(mine.value, hold)) {
    store_.hset(key, owner, hold, now);
    if (store_.pttl(key, now) < ttl) store_.pexpire(key, ttl, now);
    if (record) count_permit(*record, at(call.args, 7), key, 0, now);
    return integer(next_token(call, ttl, now));
  }
  return array({0, counter(fence, floor, now), store_.pttl(key, now)});
}

// acquire.lua's grant on a semaphore slot: `held` counts a permit granted on a free slot, the
// record names the count, and lives at least as long as the slot's key.
void SimNode::count_permit(const std::string& record, const std::string& permits,
                           const std::string& key, std::int64_t added, std::int64_t now) {
  const HGet held = store_.hget(record, "held", now);
  const std::int64_t before = held.kind == HGet::Kind::value ? number(held.value) : 0;
  store_.hset(record, "held", std::to_string(before + added), now);
  store_.hset(record, "n", permits, now);
  const std::int64_t live = store_.pttl(key, now);
  if (store_.pttl(record, now) < live) store_.pexpire(record, live, now);
}

resp::Reply SimNode::release(const node::Call& call, std::int64_t now) {
  const std::string& key = at(call.keys, 0);
  const std::string& queue = at(call.keys, 1);
  const std::string& owner = at(call.args, 0);
  const std::string& hold = at(call.args, 2);
  const HGet id = store_.hget(key, owner, now);
  if (id.kind != HGet::Kind::value || (!hold.empty() && id.value != hold)) return integer(-1);
  store_.del(key);
  // KEYS[5]: a semaphore slot's permit record, deleted with its last permit.
  if (call.keys.size() > 4) {
    const std::string record = at(call.keys, 4);
    const HGet held = store_.hget(record, "held", now);
    const std::int64_t left = (held.kind == HGet::Kind::value ? number(held.value) : 0) - 1;
    if (left <= 0) {
      store_.del(record);
    } else {
      store_.hset(record, "held", std::to_string(left), now);
    }
  }
  // The fair queue is never created here (fair mode is not simulated), so the loop over it
  // ends at once; the release is published to nobody (no subscriber in the simulation).
  if (store_.exists(queue, now)) throw std::logic_error("sim: a fair queue exists");
  return integer(0);
}

// acquire_batch.lua, line by line: per name (KEYS[3i..3i+2] the key, its counter, its readers;
// ARGV[4i-3..4i] owner, hold id, ttl, counter) acquire.lua's path for a free name without
// readers, or nil (nothing changed: the client sends that call alone; also a name whose keys
// meet an earlier name's). The tokens in item order as acquire.lua's next_token() one call after
// the other, or larger: by the node's counter ('n') the floor
// as those calls leave it plus one (the clock when there is none), above the largest counter of
// a node-counted name granted (each taken away); by the name's, its counter (else the floor,
// else the clock) plus one, written back with the ttl. The floor follows every token, written
// once; one record per ttl granted.
resp::Reply SimNode::acquire_batch(const node::Call& call, std::int64_t now) {
  const std::string& floor = at(call.keys, 0);
  const std::string& max_ttl = at(call.keys, 1);
  const std::size_t items = (call.keys.size() - 2) / 3;
  const auto by_node = [&](std::size_t i) { return at(call.args, 4 * i + 3) == "n"; };
  std::vector<bool> granted(items, false);
  std::vector<std::optional<std::int64_t>> counters(items);
  std::set<std::int64_t> ttls;  // the ttls granted in this call, each once
  std::int64_t named = 0;       // the largest counter of a node-counted name granted
  // Every key of the names met: a name whose keys meet an earlier name's (the same name twice,
  // or a name that is another's counter or readers key) is nil.
  std::set<std::string> reserved;
  for (std::size_t i = 0; i < items; ++i) {
    const std::string& key = at(call.keys, 3 * i + 2);
    const std::string& readers = at(call.keys, 3 * i + 4);
    const bool free = !store_.exists(key, now) && !store_.exists(readers, now);
    bool meets = false;
    for (std::size_t k = 2; k <= 4; ++k)
      meets = !reserved.insert(at(call.keys, 3 * i + k)).second || meets;
    if (meets) continue;
    if (!free && mutation_ != Mutation::batch_grants_when_held) continue;
    if (const auto counted = store_.get(at(call.keys, 3 * i + 3), now)) {
      counters[i] = number(*counted);
      if (by_node(i)) named = std::max(named, *counters[i]);
    }
    ttls.insert(ttl_of(at(call.args, 4 * i + 2)));
    granted[i] = true;
  }
  resp::Reply out;
  out.type = resp::Reply::Type::array;
  out.elements.resize(items);  // nil each, until granted
  if (ttls.empty()) return out;
  const bool reuse =
      mutation_ == Mutation::batch_reuses_floor || mutation_ == Mutation::no_fence_increment;
  const bool share = mutation_ == Mutation::batch_shares_one_token;
  const std::int64_t step = reuse ? 0 : 1;
  // A floor of kLeastCount or less is none: counted from the clock, written over at the end.
  std::optional<std::int64_t> running = count_of(floor, now);
  std::optional<std::int64_t> shared;  // the mutation batch_shares_one_token: the first token
  for (std::size_t i = 0; i < items; ++i) {
    if (!granted[i]) continue;
    const std::string& key = at(call.keys, 3 * i + 2);
    const std::string& fence = at(call.keys, 3 * i + 3);
    const std::int64_t ttl = ttl_of(at(call.args, 4 * i + 2));
    store_.hset(key, at(call.args, 4 * i), at(call.args, 4 * i + 1), now);
    store_.pexpire(key, ttl, now);
    std::int64_t token = 0;
    if (by_node(i)) {
      const std::int64_t base = running && *running > 0 ? *running : now * 1000;
      token = std::max(base, named) + step;
      store_.del(fence);
    } else {
      const bool counts = counters[i] && *counters[i] > kLeastCount;
      token = (counts ? *counters[i] : running ? *running : now * 1000) + step;
      store_.set(fence, std::to_string(token), ttl, now);
    }
    if (share) token = shared.value_or(token);
    shared = shared.value_or(token);
    // acquire.lua's raise_floor(): above the floor; a floor that counts nothing, the clock too.
    running = running ? std::max(*running, token) : std::max(token, now * 1000);
    out.elements[i] = integer(token);
  }
  if (running) store_.set(floor, std::to_string(*running), std::nullopt, now);
  for (const std::int64_t ttl : ttls) record_granted_ttl(max_ttl, ttl, now);
  return out;
}

// The lock key is a string "dlock" F " " HOLD_ID " " OWNER in the real scripts (issue 32), a
// hash owner -> hold id here: the model needs no change, since no outcome changed. Who holds,
// which acquisition is granted or refused, which release or renewal finds its hold are the
// same; the waiter flag F only decides whether a release publishes (pub/sub is not modelled:
// every release here publishes to nobody, 0) and whether release_batch.lua frees a name or
// leaves it to release.lua (nil), which then frees it alike: the same key deleted, the same 0.
// So release_batch() below still leaves only a name with a fair queue alone (never here).
// release_batch.lua, line by line: per name (KEYS[i] the key; ARGV[3i-2..3i] owner, channel,
// hold id) release.lua's write release by hold id: -1 if this hold is not here, nil if a fair
// queue exists (the model's stand-in for the flag: release.lua walks it), else the key deleted
// and the release published (to nobody here: 0).
resp::Reply SimNode::release_batch(const node::Call& call, std::int64_t now) {
  resp::Reply out;
  out.type = resp::Reply::Type::array;
  for (std::size_t i = 0; i < call.keys.size(); ++i) {
    const std::string& key = at(call.keys, i);
    const HGet id = store_.hget(key, at(call.args, 3 * i), now);
    if (id.kind != HGet::Kind::value || id.value != at(call.args, 3 * i + 2)) {
      out.elements.push_back(integer(-1));
    } else if (store_.exists(lock::queue_key(key), now)) {
      out.elements.emplace_back();  // nil
    } else {
      store_.del(key);
      out.elements.push_back(integer(0));
    }
  }
  return out;
}

resp::Reply SimNode::renew(const node::Call& call, std::int64_t now) {
  std::vector<std::int64_t> result;
  for (std::size_t i = 0; i < call.keys.size(); ++i) {
    const std::string& key = at(call.keys, i);
    if (at(call.args, 4 * i + 3) == "p") {  // a permit record: re-armed if it is here
      const bool here = store_.exists(key, now);
      const std::int64_t ttl = ttl_of(at(call.args, 4 * i + 2));
      if (here && store_.pttl(key, now) < ttl) store_.pexpire(key, ttl, now);
      result.push_back(here ? 1 : 0);
      continue;
    }
    const HGet id = store_.hget(key, at(call.args, 4 * i), now);
    if (id.kind == HGet::Kind::value && id.value == at(call.args, 4 * i + 1)) {
      const std::int64_t ttl = ttl_of(at(call.args, 4 * i + 2));
      if (store_.pttl(key, now) < ttl) store_.pexpire(key, ttl, now);
      result.push_back(1);
    } else {
      result.push_back(0);
    }
  }
  return array(result);
}

// fence_raise.lua: the count raised to the token whether the hold is here or not (the floor,
// and the name's counter only where it exists; counts read as acquire.lua reads them); the reply
// is the counter if KEYS[3] holds this hold (owner -> hold id), else -1. Read holds are not
// simulated.
resp::Reply SimNode::fence_raise(const node::Call& call, std::int64_t now) {
  const std::string& fence = at(call.keys, 0);
  const std::string& floor = at(call.keys, 1);
  if (at(call.args, 4) != "w") return error("ERR sim: read holds not modelled");
  const HGet id = store_.hget(at(call.keys, 2), at(call.args, 2), now);
  const bool here = id.kind == HGet::Kind::value && id.value == at(call.args, 3);
  std::int64_t current = counter(fence, floor, now);  // counts as acquire.lua's (count_of())
  const std::int64_t token = number(at(call.args, 0));
  if (current < token) {
    if (count_of(fence, now)) store_.set(fence, at(call.args, 0), number(at(call.args, 1)), now);
    raise_floor(floor, token, now);
    current = token;
  }
  return integer(here ? current : -1);
}

resp::Reply SimNode::hello(const node::Call& call, std::int64_t now) {
  const std::string& boots = at(call.keys, 0);
  const std::string& max_ttl_key = at(call.keys, 1);
  // In use once it holds boot records. 'greet' on a node not in use writes nothing; 'join' makes
  // it a member with the ages the greeting learned.
  const bool in_use = !store_.hgetall(boots, now).empty();
  const bool joining = at(call.args, 2) == "join";
  // KEYS[3]: the fence floor, read only; the greeting's reply ends with it (0: none, or at or
  // below kLeastCount).
  const auto floor = [&] { return count_of(at(call.keys, 2), now).value_or(0); };
  if (!in_use && !joining) {
    std::vector<std::int64_t> result{live_max_ttl(max_ttl_key, now), 0};
    for (std::size_t i = 3; i + 1 < call.args.size(); i += 2) result.push_back(-1);
    result.push_back(floor());
    return array(result);
  }
  // ARGV[1]: the announcement, a member "ttl.<digits>" (or a bare ttl; '0': none).
  const std::int64_t announced = ttl_part(at(call.args, 0));
  if (announced > 0) record_ttl(max_ttl_key, at(call.args, 0), 2 * announced, now);
  const std::int64_t max_ttl = live_max_ttl(max_ttl_key, now);
  if (joining) {
    for (std::size_t i = 3; i + 1 < call.args.size(); i += 2) {
      const std::int64_t age = number(at(call.args, i + 1));
      if (store_.hget(boots, at(call.args, i), now).kind != HGet::Kind::value) {
        store_.hset(boots, at(call.args, i),
                    std::to_string(now) + " " + std::to_string(age >= 0 ? now - age : 0), now);
      }
    }
    return array({max_ttl, 1});
  }

  // It vouches only if it holds the boot records of a quorum of the set's size (ARGV[2]),
  // named now or not, counted before old records are dropped.
  const bool vouches = store_.hgetall(boots, now).size() >=
                       static_cast<std::size_t>(number(at(call.args, 1)) / 2 + 1);

  std::vector<std::int64_t> result{max_ttl, 1};
  // for i = 4, #ARGV - 1, 2: the pairs (run_id, uptime) after ARGV[1..3].
  for (std::size_t i = 3; i + 1 < call.args.size(); i += 2) {
    const std::string& run_id = at(call.args, i);
    const std::int64_t uptime = number(at(call.args, i + 1));
    const HGet record = store_.hget(boots, run_id, now);
    std::int64_t boot = 0;
    if (record.kind == HGet::Kind::value) {
      boot = trailing_number(record.value).value_or(0);
    } else if (vouches) {
      boot = now;  // hello.lua: first seen now, whatever its uptime
      (void)uptime;
    }
    store_.hset(boots, run_id, std::to_string(now) + " " + std::to_string(boot), now);
    result.push_back(boot > 0 && mutation_ != Mutation::forget_boots ? now - boot : -1);
  }
  // Records not seen for a day (or twice the largest ttl) are dropped.
  const std::int64_t keep = std::max<std::int64_t>(2 * max_ttl, 86400000);
  for (const auto& [run_id, record] : store_.hgetall(boots, now)) {
    const auto seen = leading_number(record);
    if (!seen || *seen < now - keep) store_.hdel(boots, run_id, now);
  }
  result.push_back(floor());
  return array(result);
}

// floor_raise.lua: an existing floor below ARGV[1] is raised to it; none stays none.
resp::Reply SimNode::floor_raise(const node::Call& call, std::int64_t now) {
  const std::string& key = at(call.keys, 0);
  const auto f = count_of(key, now);  // none, or at or below kLeastCount: left alone
  if (!f) return integer(0);
  const std::int64_t target = number(at(call.args, 0));
  if (*f >= target) return integer(*f);
  store_.set(key, at(call.args, 0), std::nullopt, now);
  return integer(target);
}

// force_release.lua: the writer, the readers and the waiting writers of a name deleted, whoever
// holds it; a foreign key only with ARGV[2] '1'. Nobody listens to the release channel here, and
// no fair queue exists (fair mode is not simulated).
resp::Reply SimNode::force_release(const node::Call& call, std::int64_t now) {
  const std::string kind = store_.type(at(call.keys, 0), now);
  bool readers = false;
  for (const std::size_t k : {std::size_t{2}, std::size_t{3}}) {
    readers = store_.exists(at(call.keys, k), now) || readers;
    store_.del(at(call.keys, k));
  }
  resp::Reply r;
  r.type = resp::Reply::Type::string;
  if (kind == "none" && !readers) {
    r.str = "free";
    return r;
  }
  const bool foreign = kind != "none" && kind != "hash";
  if (foreign && at(call.args, 1) != "1") {
    r.str = "kept-foreign";
    return r;
  }
  if (kind != "none") store_.del(at(call.keys, 0));
  r.str = foreign ? "deleted-foreign" : "deleted";
  return r;
}

}  // namespace dlock::sim

// SPDX-License-Identifier: MIT
// The data of one simulated Redis node: strings and hashes with millisecond expiry on the node's
// own clock, read the way Redis reads them (a key whose time has passed is gone, lazily).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace dlock::sim {

using Clock = std::chrono::steady_clock;

// A node's clock: steady_clock scaled by `rate` (its drift) from `origin`, read in whole
// milliseconds as Redis's TIME and expiry are. Starts at `base_ms`, a wall-clock-like value, so
// the arithmetic of hello.lua (now - keep) behaves as on a real server.
class NodeClock {
 public:
  NodeClock(Clock::time_point origin, std::int64_t base_ms, double rate)
      : origin_(origin), base_ms_(base_ms), rate_(rate) {}
  std::int64_t now_ms() const { return at(Clock::now()); }
  std::int64_t at(Clock::time_point t) const;
  // The first real instant at which this clock reads `node_ms` or more.
  Clock::time_point real_time(std::int64_t node_ms) const;
  double rate() const { return rate_; }

 private:
  Clock::time_point origin_;
  std::int64_t base_ms_;
  double rate_;
};

using Hash = std::map<std::string, std::string>;

struct Entry {
  std::variant<std::string, Hash> value;
  std::optional<std::int64_t> expire_at;  // node ms; the key is gone once now > expire_at
};

// What HGET gives a script: nil, the field's value, or WRONGTYPE (an error table under pcall).
struct HGet {
  enum class Kind { nil, value, wrong_type };
  Kind kind = Kind::nil;
  std::string value;
};

// Every call takes the script's frozen `now`: Redis reads the clock once per script.
class Store {
 public:
  bool exists(const std::string& key, std::int64_t now) { return find(key, now) != nullptr; }
  // "none", "string" or "hash", as TYPE answers.
  std::string type(const std::string& key, std::int64_t now);
  std::optional<std::string> get(const std::string& key, std::int64_t now);
  // SET key value [PX ms]: without PX the key keeps no ttl, as a plain SET does.
  void set(const std::string& key, std::string value, std::optional<std::int64_t> px,
           std::int64_t now);
  HGet hget(const std::string& key, const std::string& field, std::int64_t now);
  void hset(const std::string& key, const std::string& field, std::string value, std::int64_t now);
  void hdel(const std::string& key, const std::string& field, std::int64_t now);
  Hash hgetall(const std::string& key, std::int64_t now);
  void del(const std::string& key) { data_.erase(key); }
  // -2: no such key, -1: no ttl, else the milliseconds left (0 in its last millisecond).
  std::int64_t pttl(const std::string& key, std::int64_t now);
  void pexpire(const std::string& key, std::int64_t ms, std::int64_t now);
  void clear() { data_.clear(); }

  // The live keys at `now`, for the invariant checks (expired ones are dropped first).
  const std::map<std::string, Entry>& live(std::int64_t now);

 private:
  Entry* find(const std::string& key, std::int64_t now);
  std::map<std::string, Entry> data_;
};

}  // namespace dlock::sim

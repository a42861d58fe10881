// SPDX-License-Identifier: MIT
#include "sim/sim_store.h"

#include <cmath>
#include <stdexcept>

namespace dlock::sim {

std::int64_t NodeClock::at(Clock::time_point t) const {
  const double elapsed_ms = std::chrono::duration<double, std::milli>(t - origin_).count();
  return base_ms_ + static_cast<std::int64_t>(std::floor(elapsed_ms * rate_));
}

Clock::time_point NodeClock::real_time(std::int64_t node_ms) const {
  const double real_ms = static_cast<double>(node_ms - base_ms_) / rate_;
  // Rounded up to the next microsecond: never earlier than the clock really gets there.
  const auto us = static_cast<std::int64_t>(std::ceil(real_ms * 1000.0));
  return origin_ + std::chrono::microseconds(us);
}

Entry* Store::find(const std::string& key, std::int64_t now) {
  auto it = data_.find(key);
  if (it == data_.end()) return nullptr;
  if (it->second.expire_at && now > *it->second.expire_at) {
    data_.erase(it);
    return nullptr;
  }
  return &it->second;
}

std::string Store::type(const std::string& key, std::int64_t now) {
  const Entry* e = find(key, now);
  if (!e) return "none";
  return std::holds_alternative<Hash>(e->value) ? "hash" : "string";
}

std::optional<std::string> Store::get(const std::string& key, std::int64_t now) {
  const Entry* e = find(key, now);
  if (!e) return std::nullopt;
  // The scripts only GET keys they SET as strings; anything else is a bug in the model.
  if (!std::holds_alternative<std::string>(e->value)) throw std::logic_error("GET on a hash");
  return std::get<std::string>(e->value);
}

void Store::set(const std::string& key, std::string value, std::optional<std::int64_t> px,
                std::int64_t now) {
  Entry e{std::move(value), std::nullopt};
  if (px) e.expire_at = now + *px;
  data_[key] = std::move(e);
}

HGet Store::hget(const std::string& key, const std::string& field, std::int64_t now) {
  const Entry* e = find(key, now);
  if (!e) return {};
  const Hash* h = std::get_if<Hash>(&e->value);
  if (!h) return {HGet::Kind::wrong_type, {}};
  const auto it = h->find(field);
  if (it == h->end()) return {};
  return {HGet::Kind::value, it->second};
}

void Store::hset(const std::string& key, const std::string& field, std::string value,
                 std::int64_t now) {
  Entry* e = find(key, now);
  if (!e) e = &(data_[key] = Entry{Hash{}, std::nullopt});
  Hash* h = std::get_if<Hash>(&e->value);
  if (!h) throw std::logic_error("HSET on a string");
  (*h)[field] = std::move(value);
}

void Store::hdel(const std::string& key, const std::string& field, std::int64_t now) {
  Entry* e = find(key, now);
  if (!e) return;
  Hash* h = std::get_if<Hash>(&e->value);
  if (!h) throw std::logic_error("HDEL on a string");
  h->erase(field);
  if (h->empty()) data_.erase(key);  // Redis deletes a hash with no fields left
}

Hash Store::hgetall(const std::string& key, std::int64_t now) {
  const Entry* e = find(key, now);
  if (!e) return {};
  const Hash* h = std::get_if<Hash>(&e->value);
  if (!h) throw std::logic_error("HGETALL on a string");
  return *h;
}

std::int64_t Store::pttl(const std::string& key, std::int64_t now) {
  const Entry* e = find(key, now);
  if (!e) return -2;
  if (!e->expire_at) return -1;
  return std::max<std::int64_t>(*e->expire_at - now, 0);
}

void Store::pexpire(const std::string& key, std::int64_t ms, std::int64_t now) {
  Entry* e = find(key, now);
  if (!e) return;
  // A non-positive ttl deletes the key at once, as Redis does.
  if (ms <= 0) {
    data_.erase(key);
    return;
  }
  e->expire_at = now + ms;
}

const std::map<std::string, Entry>& Store::live(std::int64_t now) {
  for (auto it = data_.begin(); it != data_.end();) {
    if (it->second.expire_at && now > *it->second.expire_at) {
      it = data_.erase(it);
    } else {
      ++it;
    }
  }
  return data_;
}

}  // namespace dlock::sim

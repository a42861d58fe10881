// SPDX-License-Identifier: MIT
#include <dlock/shared_mutex.h>

namespace dlock {

SharedMutex::SharedMutex(Client client, std::string name, LockOptions options,
                         std::function<void(const Error&)> on_unlock_error)
    : client_(std::move(client)),
      name_(std::move(name)),
      options_(std::move(options)),
      on_unlock_error_(std::move(on_unlock_error)) {
  options_.owner.reset();
}

bool SharedMutex::keep_or_throw(Result<Lease> lease, Side side) {
  if (lease) {
    std::lock_guard lock(mu_);
    held_[static_cast<int>(side)][std::this_thread::get_id()].push_back(std::move(*lease));
    return true;
  }
  if (is_contention(lease.error().code())) return false;
  throw Exception(std::move(lease).error());
}

bool SharedMutex::try_once(Side side) {
  if (side == Side::write) return keep_or_throw(client_.try_lock(name_, options_), side);
  LockOptions read = options_;
  read.fair = false;  // fair mode orders the writers; readers give way to waiting writers
  return keep_or_throw(client_.try_lock_shared(name_, read), side);
}

bool SharedMutex::lock_within(std::chrono::milliseconds wait, Side side) {
  wait = std::max(wait, std::chrono::milliseconds(0));
  if (side == Side::write) return keep_or_throw(client_.lock(name_, wait, options_), side);
  LockOptions read = options_;
  read.fair = false;
  return keep_or_throw(client_.lock_shared(name_, wait, read), side);
}

void SharedMutex::lock() {
  // Lockable::lock() has no time limit: wait in day-long rounds until the lock is ours.
  while (!lock_within(std::chrono::hours(24), Side::write)) {
  }
}

bool SharedMutex::try_lock() {
  return try_once(Side::write);
}

void SharedMutex::lock_shared() {
  while (!lock_within(std::chrono::hours(24), Side::read)) {
  }
}

bool SharedMutex::try_lock_shared() {
  return try_once(Side::read);
}

void SharedMutex::release(Side side) noexcept {
  Lease lease;
  {
    std::lock_guard lock(mu_);
    auto& held = held_[static_cast<int>(side)];
    auto it = held.find(std::this_thread::get_id());
    if (it == held.end() || it->second.empty()) return;
    lease = std::move(it->second.back());
    it->second.pop_back();
    if (it->second.empty()) held.erase(it);
  }
  auto released = lease.unlock();
  if (!released && on_unlock_error_) {
    try {
      on_unlock_error_(released.error());
    } catch (...) {  // NOLINT(bugprone-empty-catch): unlock() must not throw
    }
  }
}

void SharedMutex::unlock() noexcept {
  release(Side::write);
}

void SharedMutex::unlock_shared() noexcept {
  release(Side::read);
}

const Lease* SharedMutex::latest(Side side) const {
  std::lock_guard lock(mu_);
  const auto& held = held_[static_cast<int>(side)];
  auto it = held.find(std::this_thread::get_id());
  return it == held.end() || it->second.empty() ? nullptr : &it->second.back();
}

const Lease* SharedMutex::lease() const {
  return latest(Side::write);
}

const Lease* SharedMutex::shared_lease() const {
  return latest(Side::read);
}

}  // namespace dlock

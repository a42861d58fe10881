// SPDX-License-Identifier: MIT
#include <dlock/mutex.h>

namespace dlock {

Mutex::Mutex(Client client, std::string name, LockOptions options,
             std::function<void(const Error&)> on_unlock_error)
    : client_(std::move(client)),
      name_(std::move(name)),
      options_(std::move(options)),
      on_unlock_error_(std::move(on_unlock_error)) {
  options_.owner.reset();
}

void Mutex::keep(Lease lease) {
  std::lock_guard lock(mu_);
  held_[std::this_thread::get_id()].push_back(std::move(lease));
}

void Mutex::lock() {
  // Lockable::lock() has no time limit: wait in day-long rounds until the lock is ours.
  while (!lock_within(std::chrono::hours(24))) {
  }
}

bool Mutex::try_lock() {
  auto lease = client_.try_lock(name_, options_);
  if (lease) {
    keep(std::move(*lease));
    return true;
  }
  if (is_contention(lease.error().code())) return false;
  throw Exception(std::move(lease).error());
}

bool Mutex::lock_within(std::chrono::milliseconds wait) {
  auto lease = client_.lock(name_, std::max(wait, std::chrono::milliseconds(0)), options_);
  if (lease) {
    keep(std::move(*lease));
    return true;
  }
  if (is_contention(lease.error().code())) return false;
  throw Exception(std::move(lease).error());
}

void Mutex::unlock() noexcept {
  Lease lease;
  {
    std::lock_guard lock(mu_);
    auto it = held_.find(std::this_thread::get_id());
    if (it == held_.end() || it->second.empty()) return;
    lease = std::move(it->second.back());
    it->second.pop_back();
    if (it->second.empty()) held_.erase(it);
  }
  auto released = lease.unlock();
  if (!released && on_unlock_error_) {
    try {
      on_unlock_error_(released.error());
    } catch (...) {  // NOLINT(bugprone-empty-catch): unlock() must not throw
    }
  }
}

const Lease* Mutex::lease() const {
  std::lock_guard lock(mu_);
  auto it = held_.find(std::this_thread::get_id());
  return it == held_.end() || it->second.empty() ? nullptr : &it->second.back();
}

}  // namespace dlock

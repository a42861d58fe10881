// SPDX-License-Identifier: MIT
#include "lock/holds.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>

#include "engine/run.h"
#include "lock/owner.h"

namespace dlock::lock {

// Written into `key` (its capacity reused: Holds keeps one such buffer, and a lock cycle looks
// entries up five times).
void write_hold_entry_key(std::string& key, std::string_view name, const OwnerToken& owner,
                          HoldKind hold_kind) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, name.size()).ptr;
  const auto length = static_cast<std::size_t>(end - digits);
  const std::string& who = owner.str();
  // Sized once and copied into (this runs five times a lock cycle): not five appends.
  key.resize(length + 2 + name.size() + who.size());
  char* p = key.data();
  std::memcpy(p, digits, length);
  p += length;
  *p++ = ':';
  if (!name.empty()) std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = *kind_arg(hold_kind);
  if (!who.empty()) std::memcpy(p, who.data(), who.size());
}

std::string hold_entry_key(std::string_view name, const OwnerToken& owner, HoldKind kind) {
  std::string key;
  write_hold_entry_key(key, name, owner, kind);
  return key;
}

namespace {

using Status = detail::LeaseState::Status;

}  // namespace

Holds::Holds(QuorumLock& lock) : lock_(lock), id_prefix_(random_hex(8) + ".") {
  spares_.reserve(kSpares);
}

std::string Holds::next_hold_id() {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits,
                                 next_id_.fetch_add(1, std::memory_order_relaxed) + 1)
                       .ptr;
  std::string id;
  id.reserve(id_prefix_.size() + static_cast<std::size_t>(end - digits));
  id.append(id_prefix_).append(digits, end);
  return id;
}

std::shared_ptr<Holds::Entry> Holds::enter(std::string_view name, const OwnerToken& owner,
                                           HoldKind kind) {
  std::lock_guard lock(mu_);
  write_hold_entry_key(key_, name, owner, kind);
  auto it = entries_.find(key_);
  if (it == entries_.end()) {
    it = add_locked(kind);
    it->second->key = &it->first;  // a node's key stays where it is until it is erased
  }
  ++it->second->users;
  return it->second;
}

Holds::Entries::iterator Holds::add_locked(HoldKind kind) {
  // Reused only when the spare is nobody else's: a Task that left the entry may still hold its
  // pointer until its frame ends. It was erased unused (no users, no hold with leases, its
  // mutex free), so it is a new entry once its hold is dropped.
  // The newest spares first (the memory used last), though the newest is also the likeliest to
  // be still held by a frame that is ending; only a few are looked at.
  const std::size_t look = std::min<std::size_t>(spares_.size(), 4);
  auto spare = spares_.end();
  for (std::size_t k = 1; k <= look; ++k) {
    if (spares_[spares_.size() - k].mapped().use_count() == 1) {
      spare = spares_.end() - static_cast<std::ptrdiff_t>(k);
      break;
    }
  }
  if (spare != spares_.end()) {
    // use_count() is a relaxed load: the acquire fence orders this thread's writes below after
    // whatever the last other owner did with the entry before it dropped its pointer (that
    // drop is a release). TSan does not model fences (GCC refuses them under -Wtsan) and
    // reports the race on its own if the order is ever missing.
#if !defined(__SANITIZE_THREAD__)
    std::atomic_thread_fence(std::memory_order_acquire);
#endif
    Entries::node_type node = std::move(*spare);
    spares_.erase(spare);
    node.key() = key_;
    node.mapped()->current = nullptr;
    node.mapped()->kind = kind;
    return entries_.insert(std::move(node)).position;
  }
  auto entry = std::make_shared<Entry>(
      [this](std::function<void()> f) { lock_.fanout().post(std::move(f)); });
  entry->kind = kind;
  return entries_.emplace(key_, std::move(entry)).first;
}

void Holds::settle(Entry& e) {
  const bool keep = e.current && !e.current->leases.empty();
  std::lock_guard lock(mu_);
  if (e.kind == HoldKind::read && keep != e.keep) {
    if (keep) {
      kept_reads_.fetch_add(1);
    } else {
      kept_reads_.fetch_sub(1);
    }
  }
  e.keep = keep;
}

void Holds::leave(const std::shared_ptr<Entry>& e) {
  // A hold with leases keeps its entry: reentrancy looks it up there. Calls on one entry are
  // serialized, so the last one to settle left the entry's latest state.
  std::lock_guard lock(mu_);
  if (--e->users != 0 || e->keep) return;
  auto node = entries_.extract(entries_.find(*e->key));
  // Room reserved at construction: keeping a spare never allocates (nor throws).
  if (spares_.size() < kSpares) spares_.push_back(std::move(node));
}

bool Holds::has(const std::string& name, const OwnerToken& owner, HoldKind kind) {
  // Kept read entries are counted under mu_: none counted, none to find (the same answer the
  // lookup would give at this moment).
  if (kind == HoldKind::read && kept_reads_.load() == 0) return false;
  std::lock_guard lock(mu_);
  write_hold_entry_key(key_, name, owner, kind);
  const auto it = entries_.find(key_);
  // `keep` is set while the entry's current hold has leases (a hold being released right now
  // may still count: then the caller is refused and may try again).
  return it != entries_.end() && it->second->keep;
}

std::optional<Clock::time_point> Holds::live_until(const Hold& hold) {
  if (hold.lost.load()) return std::nullopt;
  std::optional<Clock::time_point> until;
  for (const auto& weak : hold.leases) {
    const auto lease = weak.lock();
    if (!lease) continue;
    std::lock_guard lock(lease->mu);
    if (lease->status == Status::held && Clock::now() < lease->valid_until) {
      until = std::max(until.value_or(lease->valid_until), lease->valid_until);
    }
  }
  return until;
}

std::optional<Refused> Holds::acquire(const std::shared_ptr<detail::LeaseState>& lease,
                                      const std::string& name, const OwnerToken& owner,
                                      std::chrono::milliseconds ttl,
                                      const std::optional<FairTicket>& fair, HoldKind kind,
                                      WriterWait writer, ReplicaGuard guard, std::size_t permits) {
  return engine::run_sync(
      acquire_task(lease, name, owner, ttl, fair, kind, writer, guard, permits));
}

engine::Task<std::optional<Refused>> Holds::acquire_task(std::shared_ptr<detail::LeaseState> lease,
                                                         std::string name, OwnerToken owner,
                                                         std::chrono::milliseconds ttl,
                                                         std::optional<FairTicket> fair,
                                                         HoldKind kind, WriterWait writer,
                                                         ReplicaGuard guard, std::size_t permits) {
  // An upgrade would wait for its own read hold (below, once it is known not to be reentrant).
  const auto upgrade = [&] {
    return Refused{Error(errc::invalid_argument,
                         "lock '" + name + "': owner '" + owner.str() +
                             "' holds it for reading; a read hold cannot be upgraded (release "
                             "it first)"),
                   std::nullopt};
  };
  if (kind == HoldKind::write && has(name, owner, HoldKind::read) &&
      !has(name, owner, HoldKind::write)) {
    co_return upgrade();
  }
  const auto entry = enter(name, owner, kind);
  std::optional<Refused> refused;
  {
    auto lock = co_await entry->mu.lock();
    std::shared_ptr<Hold> hold = entry->current;
    const auto until = hold ? live_until(*hold) : std::nullopt;
    if (until) {
      auto joining = join_task(lease, hold, name, ttl, *until);
      refused = co_await std::move(joining);
    }
    // A writer that downgraded (took the read lock too) and still holds the write lock takes it
    // again reentrantly, above. Once its write hold has ended (expired, lost, forgotten) while
    // the read hold lives, a new write hold is an upgrade: refused, or it would wait for its
    // own reader (and its registration keep every other reader out meanwhile).
    if (!lease->hold && !refused && kind == HoldKind::write && has(name, owner, HoldKind::read)) {
      refused = upgrade();
    }
    if (!lease->hold && !refused) {
      // Moved: nothing below reads them (the entry has its own key).
      HoldId id{std::move(name), std::move(owner), next_hold_id(), kind};
      auto acquiring = lock_.acquire_task(id, ttl, fair, writer, guard, permits);
      auto result = co_await std::move(acquiring);
      if (auto* acquired = std::get_if<Acquired>(&result)) {
        hold = std::make_shared<Hold>(std::move(id), acquired->fence);
        lease->hold = hold;
        lease->valid_until = acquired->valid_until;
        hold->leases.push_back(lease);
        entry->current = hold;
      } else {
        refused = std::move(std::get<Refused>(result));
      }
    }
    settle(*entry);
  }
  leave(entry);
  co_return refused;
}

engine::Task<std::optional<Refused>> Holds::join_task(std::shared_ptr<detail::LeaseState> lease,
                                                      std::shared_ptr<Hold> hold, std::string name,
                                                      std::chrono::milliseconds ttl,
                                                      Clock::time_point until) {
  // Reentrant: the key must now outlive this lease's ttl too, on a quorum.
  auto extending = lock_.extend_task(hold->id, ttl, until);
  auto extended = co_await std::move(extending);
  if (extended) {
    lease->hold = hold;
    lease->valid_until = *extended;
    hold->leases.push_back(lease);
    co_return std::nullopt;
  }
  if (extended.error().is(errc::lock_lost)) {
    // The hold is gone: its leases are lost, and this acquisition starts a new hold.
    hold->lost.store(true);
    co_return std::nullopt;
  }
  if (extended.error().is(errc::timeout) && !live_until(*hold)) {
    // The validity it was judged against ended before a quorum confirmed, and no lease of the
    // hold is live now (an ended validity is never revived): this acquisition is not reentrant
    // and starts a new hold, which takes the old one over on the nodes.
    co_return std::nullopt;
  }
  if (extended.error().is(errc::timeout)) {
    // A lease of the hold is live again: the watchdog (or an extend) renewed it while this
    // extension was on its way. Starting a new hold now would take the live one over (its
    // release, or this acquisition's clean-up, would then free the lock under it): refuse, the
    // caller may try again against the newer validity.
    co_return Refused{
        Error(errc::quorum_not_reached,
              "lock '" + name + "': reentrant extension judged against an earlier validity",
              extended.error().nodes()),
        std::nullopt};
  }
  co_return Refused{std::move(extended).error(), std::nullopt};
}

Holds::Ended Holds::end(const std::shared_ptr<detail::LeaseState>& lease, bool release) {
  return engine::run_sync(end_task(lease, release));
}

engine::Task<Holds::Ended> Holds::end_task(std::shared_ptr<detail::LeaseState> lease,
                                           bool release) {
  const Hold& hold = *lease->hold;
  const auto entry = enter(hold.id.name, hold.id.owner, hold.id.kind);
  Ended ended;
  {
    auto lock = co_await entry->mu.lock();
    auto& leases = lease->hold->leases;
    leases.erase(std::remove_if(leases.begin(), leases.end(),
                                [&](const std::weak_ptr<detail::LeaseState>& w) {
                                  const auto l = w.lock();
                                  return !l || l == lease;
                                }),
                 leases.end());
    if (leases.empty()) {
      ended.last = true;
      if (entry->current == lease->hold) entry->current = nullptr;
    }
    if (leases.empty() && release) {
      // Even when the hold expired or was lost: nodes that still have it must not keep it.
      // The hold id makes sure nothing but this hold is released.
      auto releasing = lock_.release_task(hold.id, &ended.listeners);
      ended.released = co_await std::move(releasing);
    }
    settle(*entry);
  }
  leave(entry);
  co_return ended;
}

void Holds::forget(const std::string& name, const OwnerToken& owner, HoldKind kind) {
  engine::run_sync(forget_task(name, owner, kind));
}

engine::Task<bool> Holds::forget_task(std::string name, OwnerToken owner, HoldKind kind) {
  const auto entry = enter(name, owner, kind);
  {
    auto lock = co_await entry->mu.lock();
    if (entry->current) entry->current->lost.store(true);
    settle(*entry);
  }
  leave(entry);
  co_return true;
}

std::size_t Holds::entries() {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace dlock::lock

// SPDX-License-Identifier: MIT
#include "lock/quorum_lock.h"

#include <algorithm>

#include "lock/keys.h"
#include "lock/validity.h"
#include "scripts/script.h"

namespace dlock::lock {
namespace {

std::string ms(Clock::duration d) {
  return std::to_string(std::chrono::ceil<std::chrono::milliseconds>(d).count()) + " ms";
}

// An integer element of a script's array reply, or nullopt if the reply has another shape.
std::optional<std::int64_t> int_at(const resp::Reply& r, std::size_t i) {
  if (!r.is_array() || r.elements.size() <= i || !r.elements[i].is_integer()) return std::nullopt;
  return r.elements[i].integer;
}

}  // namespace

std::chrono::milliseconds QuorumLock::drift(std::chrono::milliseconds ttl) const {
  return lock::drift(ttl, drift_factor_);
}

NodeError QuorumLock::node_error(std::size_t i, const Error& e) const {
  return NodeError{nodes_.address(i).display(), e.code(), e.summary()};
}

NodeError QuorumLock::node_error(std::size_t i, errc code, std::string reason) const {
  return NodeError{nodes_.address(i).display(), make_error_code(code), std::move(reason)};
}

Result<Acquired> QuorumLock::acquire(const std::string& name, const OwnerToken& owner,
                                     std::chrono::milliseconds ttl) {
  const auto start = Clock::now();
  node::Outcomes outcomes = nodes_.run_script(scripts::acquire(), {name, fence_key(name)},
                                              {owner.str(), std::to_string(ttl.count())});
  const auto elapsed = Clock::now() - start;

  std::size_t acquired = 0;
  std::size_t held = 0;
  Acquired result;
  std::vector<NodeError> failures;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    if (!o) {
      failures.push_back(node_error(i, o.error()));
      continue;
    }
    if (o->is_error()) {
      failures.push_back(node_error(i, errc::script_error, o->str));
      continue;
    }
    auto status = int_at(*o, 0);
    auto fence = int_at(*o, 1);
    auto detail = int_at(*o, 2);
    if (!status || !fence || !detail) {
      failures.push_back(node_error(i, errc::protocol_error, "unexpected reply to acquire"));
    } else if (*status == 1 || *status == 2) {
      ++acquired;
      result.fence = std::max(result.fence, FencingToken(static_cast<std::uint64_t>(*fence)));
      result.reentered = result.reentered || *status == 2;
    } else {
      ++held;
      failures.push_back(node_error(
          i, errc::lock_held,
          "held by another owner" +
              (*detail >= 0 ? " (expires in " + std::to_string(*detail) + " ms)" : std::string())));
    }
  }

  const auto left = validity(ttl, elapsed, drift_factor_);
  if (acquired >= nodes_.quorum() && left.count() > 0) {
    result.valid_until = start + (ttl - drift(ttl));
    return result;
  }

  // Failed: give back whatever this attempt took, everywhere, also where the reply was lost.
  (void)release(name, owner);

  const std::string counts = std::to_string(acquired) + " of " + std::to_string(nodes_.size()) +
                             " nodes acquired, quorum is " + std::to_string(nodes_.quorum());
  if (acquired >= nodes_.quorum()) {
    return Error(errc::timeout, "lock '" + name + "': quorum reached after " + ms(elapsed) +
                                    ", too late for a ttl of " + ms(ttl) + " (released)");
  }
  if (held > 0 && acquired + held >= nodes_.quorum()) {
    return Error(errc::lock_held, "lock '" + name + "' is held by another owner (" + counts + ")",
                 std::move(failures));
  }
  return Error(errc::quorum_not_reached, "lock '" + name + "': no quorum (" + counts + ")",
               std::move(failures));
}

Result<void> QuorumLock::release(const std::string& name, const OwnerToken& owner) {
  node::Outcomes outcomes =
      nodes_.run_script(scripts::release(), {name}, {owner.str(), release_channel(name)});
  std::size_t confirmed = 0;
  std::size_t errors = 0;
  std::vector<NodeError> failures;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    if (!o || o->is_error() || !o->is_integer()) {
      ++errors;
      failures.push_back(o ? node_error(i, errc::script_error, o->str) : node_error(i, o.error()));
    } else if (o->integer == 1 || o->integer == 2) {
      ++confirmed;
    } else {
      failures.push_back(node_error(i, errc::not_owner, "not held by this owner"));
    }
  }
  if (confirmed >= nodes_.quorum()) return {};
  const std::string counts = std::to_string(confirmed) + " of " + std::to_string(nodes_.size()) +
                             " nodes confirmed the owner, quorum is " +
                             std::to_string(nodes_.quorum());
  if (confirmed + errors >= nodes_.quorum()) {
    return Error(errc::quorum_not_reached,
                 "lock '" + name + "': release not confirmed by a quorum (" + counts +
                     "); unreachable nodes drop it when the ttl ends",
                 std::move(failures));
  }
  return Error(errc::not_owner,
               "lock '" + name + "' is not held by owner '" + owner.str() + "' (" + counts + ")",
               std::move(failures));
}

Result<Clock::time_point> QuorumLock::extend(const std::string& name, const OwnerToken& owner,
                                             std::chrono::milliseconds ttl,
                                             Clock::time_point valid_until) {
  const auto start = Clock::now();
  node::Outcomes outcomes =
      nodes_.run_script(scripts::extend(), {name}, {owner.str(), std::to_string(ttl.count())});
  const auto now = Clock::now();
  std::size_t extended = 0;
  std::size_t errors = 0;
  std::vector<NodeError> failures;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    if (!o || o->is_error() || !o->is_integer()) {
      ++errors;
      failures.push_back(o ? node_error(i, errc::script_error, o->str) : node_error(i, o.error()));
    } else if (o->integer == 1) {
      ++extended;
    } else {
      failures.push_back(node_error(i, errc::not_owner, "not held by this owner"));
    }
  }
  if (now >= valid_until) {
    return Error(errc::lock_lost,
                 "lock '" + name + "': validity ended before the extension was confirmed",
                 std::move(failures));
  }
  if (extended >= nodes_.quorum() && validity(ttl, now - start, drift_factor_).count() > 0) {
    return start + (ttl - drift(ttl));
  }
  const std::string counts = std::to_string(extended) + " of " + std::to_string(nodes_.size()) +
                             " nodes extended, quorum is " + std::to_string(nodes_.quorum());
  if (extended + errors >= nodes_.quorum()) {
    return Error(errc::quorum_not_reached,
                 "lock '" + name + "': extension not confirmed by a quorum (" + counts + ")",
                 std::move(failures));
  }
  return Error(errc::lock_lost,
               "lock '" + name + "' is no longer held by this owner (" + counts + ")",
               std::move(failures));
}

LockStatus QuorumLock::inspect(const std::string& name) {
  node::Outcomes outcomes = nodes_.run_script(scripts::inspect(), {name, fence_key(name)}, {});
  LockStatus status;
  status.name = name;
  status.quorum = nodes_.quorum();
  std::size_t present = 0;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    NodeLockState n;
    n.node = nodes_.address(i).display();
    const auto& o = outcomes[i];
    if (!o) {
      n.error = o.error().summary();
    } else if (o->is_error()) {
      n.error = o->str;
    } else if (!o->is_array() || o->elements.size() < 3 || !o->elements[1].is_integer() ||
               !o->elements[2].is_integer() || o->elements.size() % 2 == 0) {
      n.error = "unexpected reply to inspect";
    } else {
      n.kind = o->elements[0].str;
      n.ttl_ms = o->elements[1].integer;
      n.fence = o->elements[2].integer;
      for (std::size_t k = 3; k + 1 < o->elements.size(); k += 2) {
        std::int64_t count = 0;
        try {
          count = std::stoll(o->elements[k + 1].str);
        } catch (const std::exception&) {
          count = 0;
        }
        n.owners.emplace_back(o->elements[k].str, count);
      }
      if (n.kind != "free") ++present;
    }
    status.nodes.push_back(std::move(n));
  }
  status.held = present >= nodes_.quorum();
  return status;
}

}  // namespace dlock::lock

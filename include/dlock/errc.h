// SPDX-License-Identifier: MIT
// dlock/errc.h: the error codes every dlock operation can report.
//
// Codes live in their own std::error_category ("dlock"), so they sit beside system codes in a
// std::error_code. Contention (`lock_held`, `wait_timeout`) is an expected outcome, not a fault:
// use is_contention() to tell it from infrastructure trouble.
//
//   auto lease = client.try_lock("jobs/nightly");
//   if (!lease && dlock::is_contention(lease.error().code())) return;  // someone else runs it
//   if (!lease && lease.error().is(dlock::errc::quorum_not_reached)) alert(lease.error());
//
// Thread-safety: codes and the category are constants, usable from any thread.
#pragma once

#include <string>
#include <system_error>

namespace dlock {

enum class errc {
  lock_held = 1,       // another owner holds the lock (on enough nodes to deny a quorum)
  wait_timeout,        // the wait limit passed before the lock became free
  quorum_not_reached,  // too few nodes answered successfully (down, slow, or erroring)
  lock_lost,           // the lease expired or was taken over; the caller no longer holds it
  not_owner,           // release/extend by an owner that does not hold the lock
  io_error,            // connect/read/write failure on a node
  timeout,             // a node did not answer within its deadline
  protocol_error,      // a node answered something that is not valid RESP or not expected
  server_error,        // a node answered with an error reply
  auth_error,          // AUTH or SELECT was refused (wrong password, unknown user, bad db)
  script_error,        // a Lua script failed on a node
  invalid_argument,    // bad input: empty name, ttl too small, malformed URL, ...
  cancelled,           // the wait was cancelled by the caller
};

const std::error_category& dlock_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), dlock_category()};
}

// True for the codes that mean "someone else has it", as opposed to a failure of the system.
inline bool is_contention(const std::error_code& ec) noexcept {
  return ec == make_error_code(errc::lock_held) || ec == make_error_code(errc::wait_timeout);
}

}  // namespace dlock

template <>
struct std::is_error_code_enum<dlock::errc> : std::true_type {};

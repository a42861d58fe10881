// SPDX-License-Identifier: MIT
#include <dlock/errc.h>
#include <dlock/result.h>

namespace dlock {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }
  std::string message(int code) const override {
    switch (static_cast<errc>(code)) {
      case errc::lock_held:
        return "lock held by another owner";
      case errc::wait_timeout:
        return "wait for the lock timed out";
      case errc::quorum_not_reached:
        return "quorum not reached";
      case errc::lock_lost:
        return "lock lost";
      case errc::not_owner:
        return "not the owner of the lock";
      case errc::io_error:
        return "I/O error";
      case errc::timeout:
        return "timed out";
      case errc::protocol_error:
        return "protocol error";
      case errc::server_error:
        return "server error";
      case errc::auth_error:
        return "authentication failed";
      case errc::script_error:
        return "script error";
      case errc::invalid_argument:
        return "invalid argument";
      case errc::cancelled:
        return "cancelled";
    }
    return "unknown dlock error";
  }
};

}  // namespace

const std::error_category& dlock_category() noexcept {
  static const Category category;
  return category;
}

std::string Error::message() const {
  std::string out = message_.empty() ? code_.message() : message_;
  for (const auto& n : nodes_) out += "; " + n.node + ": " + n.reason;
  return out;
}

}  // namespace dlock

// SPDX-License-Identifier: MIT
// dlock/fenced_store.h: FencedStore, a resource kept in Redis that accepts a write only with a
// fencing token not lower than the last one it accepted for that key.
//
// A lock holder that paused past its validity (GC, SIGSTOP, a VM migration) may wake up and
// write while another client holds the lock. The lock cannot stop that write; the resource
// can, by remembering the highest token it accepted:
//
//   auto store = dlock::FencedStore::connect("redis://10.0.0.9:6379");
//   auto lease = client.lock("account:42", 5s);
//   auto current = store->read("account:42", lease->fencing_token());  // registers the token
//   auto written = store->write("account:42", new_balance, lease->fencing_token());
//   if (written && !*written) { /* refused: a newer holder wrote; our lease is gone */ }
//
// The check and the write are one Lua script (fenced_write.lua). The same pattern for SQL is in
// docs/fencing.md. Thread-safety: a FencedStore may be shared by any number of threads.
#pragma once

#include <dlock/options.h>
#include <dlock/result.h>
#include <dlock/types.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dlock {

namespace detail {
class ClientCore;
}

class FencedStore {
 public:
  // One Redis node (the resource, not a lock node). `options.nodes` is ignored; its timeouts
  // and TLS settings apply. Errors: errc::invalid_argument for a bad URL or options.
  static Result<FencedStore> connect(const std::string& url, ClientOptions options = {});

  // Stores `value` under `key` if `token` is not lower than the last token accepted for `key`.
  // Returns true if written, false if refused (stale token). Errors: node errors.
  Result<bool> write(std::string_view key, std::string_view value, FencingToken token);
  // The value under `key`, or nullopt if none.
  Result<std::optional<std::string>> read(std::string_view key);
  // A lock holder's read: registers `token` as the last accepted one first, so no older
  // holder's write is accepted after it (use it for read-modify-write).
  // Errors: node errors, errc::invalid_argument.
  struct FencedRead {
    bool accepted = false;             // false: a holder with a newer token came first
    std::optional<std::string> value;  // when accepted: the value (nullopt if none)
  };
  Result<FencedRead> read(std::string_view key, FencingToken token);
  // The last token accepted for `key` (0 if none).
  Result<FencingToken> last_token(std::string_view key);

 private:
  explicit FencedStore(std::shared_ptr<detail::ClientCore> core) : core_(std::move(core)) {}
  std::shared_ptr<detail::ClientCore> core_;
};

}  // namespace dlock

// SPDX-License-Identifier: MIT
// The registry of dlock's Lua scripts. The scripts themselves live in src/scripts/*.lua, each
// opening with its keys, arguments and replies; docs/protocol.md restates them as the wire
// contract. CMake embeds them into the library at build time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dlock::scripts {

struct Script {
  std::string_view name;
  // The text sent to Redis: the .lua file, after key_clock.lua's shared functions for the
  // scripts that keep deadlines inside keys (script.cc).
  std::string source;
  std::string sha1;  // hex, as EVALSHA wants it
  // The scripts that open with master_only.lua's role check (it reads INFO: 2-3 us of the
  // server's CPU per call) have a second text without it, for a server that refuses them by
  // itself when it is a replica: Redis 7's shebang first (#!lua, with no `no-writes` flag), so
  // that a read-only replica (`replica-read-only yes`) refuses the whole script before it runs,
  // whichever way it would have gone, also the ways that only read. A node sends it only on a
  // connection whose server said so (node/server_node.h). Empty for the other scripts.
  std::string unguarded_source = {};
  std::string unguarded_sha1 = {};
  // The script publishes releases: the node appends the command it publishes with as the last
  // argument ("publish", or "spublish" on a Redis Cluster, where waiters listen on shard
  // channels of the lock's slot).
  bool publishes = false;

  bool has_unguarded() const { return !unguarded_source.empty(); }
  // The text or SHA1 to send: the unguarded one if `unguarded` and the script has one.
  const std::string& text(bool unguarded) const {
    return unguarded && has_unguarded() ? unguarded_source : source;
  }
  const std::string& sha(bool unguarded) const {
    return unguarded && has_unguarded() ? unguarded_sha1 : sha1;
  }
};

const Script& acquire();
const Script& release();
const Script& inspect();
const Script& renew();
const Script& fence_raise();
const Script& floor_raise();
const Script& max_ttl_raise();
const Script& max_ttl_retract();
const Script& hello();
const Script& fair_acquire();
const Script& fair_leave();
const Script& fenced_write();
const Script& fenced_read();
const Script& force_release();
const Script& semaphore_resize();
// Group commit (docs/protocol.md): many names in one call, each with its own outcome.
const Script& acquire_batch();
const Script& release_batch();

// Every script, for tests that load them all on a server.
std::vector<const Script*> all();

// Generated from the .lua files; empty for an unknown name.
std::string_view embedded_source(std::string_view name);

// Hex SHA1 of `text`, as Redis computes it for SCRIPT LOAD.
std::string sha1_hex(std::string_view text);

}  // namespace dlock::scripts

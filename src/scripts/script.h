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
  // The script publishes releases: the node appends the command it publishes with as the last
  // argument ("publish", or "spublish" on a Redis Cluster, where waiters listen on shard
  // channels of the lock's slot).
  bool publishes = false;
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

// Every script, for tests that load them all on a server.
std::vector<const Script*> all();

// Generated from the .lua files; empty for an unknown name.
std::string_view embedded_source(std::string_view name);

// Hex SHA1 of `text`, as Redis computes it for SCRIPT LOAD.
std::string sha1_hex(std::string_view text);

}  // namespace dlock::scripts

// SPDX-License-Identifier: MIT
#include "scripts/script.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace dlock::scripts {
namespace {

// Which check a script opens with. `master_only`: master_only.lua goes first, so that the
// script refuses to run on a replica (one that accepts writes would keep them to itself), and
// the script has an unguarded text (Script::unguarded_source) that opens with Redis 7's
// shebang instead. Its flags: none for the scripts that grant (acquire, fair_acquire), which a
// full server (maxmemory, noeviction) then refuses with OOM before they run (the checked text
// is refused at its first write that may take memory); `allow-oom` for those that extend,
// raise or release, which must keep working on a full server (docs/safety.md, full memory)
// and whose first write takes no memory anyway (fence_raise's counter SET aside).
enum class Guard { none, master_only, master_only_allow_oom };

constexpr std::string_view kShebang = "#!lua\n";
constexpr std::string_view kShebangAllowOom = "#!lua flags=allow-oom\n";

// A line of a clocked script where key_clock.lua goes, after a fast path that needs none of
// its functions: Lua makes each function anew on every call of the script, which costs about
// what an inner command does.
constexpr std::string_view kKeyClockHere = "-- key_clock.lua goes here (script.cc)";

// `clocked`: the script keeps deadlines inside keys, on the keys' own clocks; key_clock.lua's
// functions go before its text (or at its kKeyClockHere line), so that every such script reads
// those clocks the same way.
Script load(std::string_view name, bool publishes = false, bool clocked = false,
            Guard guard = Guard::none) {
  std::string_view body = embedded_source(name);
  if (body.empty()) throw std::logic_error("no embedded script " + std::string(name));
  std::string text;
  const std::size_t here = clocked ? body.find(kKeyClockHere) : std::string_view::npos;
  if (here != std::string_view::npos) {
    text.append(body.substr(0, here)).append(embedded_source("key_clock"));
    text.append(body.substr(here));
  } else {
    text = clocked ? std::string(embedded_source("key_clock")) : std::string();
    text += body;
  }
  Script script{name, std::string(), std::string(), {}, {}, publishes};
  if (guard == Guard::none) {
    script.source = std::move(text);
  } else {
    script.source = std::string(embedded_source("master_only")) + text;
    script.unguarded_source =
        std::string(guard == Guard::master_only ? kShebang : kShebangAllowOom) + text;
    script.unguarded_sha1 = sha1_hex(script.unguarded_source);
  }
  script.sha1 = sha1_hex(script.source);
  return script;
}

}  // namespace

std::string sha1_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha1(), nullptr) != 1) {
    throw std::runtime_error("SHA1 failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
  return out;
}

const Script& acquire() {
  static const Script s = load("acquire", false, true, Guard::master_only);
  return s;
}
const Script& release() {
  static const Script s = load("release", true, true, Guard::master_only_allow_oom);
  return s;
}
const Script& inspect() {
  static const Script s = load("inspect", false, true);
  return s;
}

const Script& renew() {
  static const Script s = load("renew", false, true, Guard::master_only_allow_oom);
  return s;
}
const Script& fence_raise() {
  static const Script s = load("fence_raise", false, false, Guard::master_only_allow_oom);
  return s;
}
const Script& floor_raise() {
  static const Script s = load("floor_raise");
  return s;
}
const Script& hello() {
  static const Script s = load("hello");
  return s;
}

const Script& fair_acquire() {
  static const Script s = load("fair_acquire", false, true, Guard::master_only);
  return s;
}
const Script& fair_leave() {
  static const Script s = load("fair_leave", true, true);
  return s;
}

const Script& fenced_write() {
  static const Script s = load("fenced_write");
  return s;
}

const Script& fenced_read() {
  static const Script s = load("fenced_read");
  return s;
}

const Script& max_ttl_raise() {
  static const Script s = load("max_ttl_raise");
  return s;
}

const Script& max_ttl_retract() {
  static const Script s = load("max_ttl_retract");
  return s;
}

const Script& force_release() {
  static const Script s = load("force_release", true, false, Guard::master_only_allow_oom);
  return s;
}

const Script& semaphore_resize() {
  static const Script s = load("semaphore_resize");
  return s;
}

// Guarded as acquire and release: they grant and release the same holds.
const Script& acquire_batch() {
  static const Script s = load("acquire_batch", false, true, Guard::master_only);
  return s;
}
const Script& release_batch() {
  static const Script s = load("release_batch", true, false, Guard::master_only_allow_oom);
  return s;
}

std::vector<const Script*> all() {
  return {&acquire(),         &release(),          &inspect(),
          &renew(),           &fence_raise(),      &hello(),
          &fair_acquire(),    &fair_leave(),       &fenced_write(),
          &fenced_read(),     &force_release(),    &max_ttl_raise(),
          &max_ttl_retract(), &semaphore_resize(), &floor_raise(),
          &acquire_batch(),   &release_batch()};
}

}  // namespace dlock::scripts

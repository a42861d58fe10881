// SPDX-License-Identifier: MIT
// Built outside dlock's tree against an installed dlock (find_package, pkg-config, the Debian
// package) or with add_subdirectory, by scripts/check-install.sh. It checks that the public
// headers are enough and nothing internal is visible, then takes, contends for and releases a
// lock with both APIs on the nodes given.
//   dlock_consumer redis://127.0.0.1:PORT [more node URLs...]
#include <dlock/async.h>
#include <dlock/dlock.h>

#include <asio/use_future.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <string_view>

// Names no system header has (node/node.h is Node.js's, net/ is glibc's).
#if __has_include(<lock/quorum_lock.h>) || __has_include(<node/node_set.h>) || \
    __has_include(<engine/task.h>) || __has_include(<resp/reader.h>)
#error "dlock's internal headers are on a consumer's include path"
#endif

namespace {

int fail(const char* what, const dlock::Error& e) {
  std::fprintf(stderr, "dlock_consumer: %s: %s\n", what, e.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  static_assert(DLOCK_VERSION_MAJOR >= 0 && std::string_view(DLOCK_VERSION_STRING).size() >= 5);
  dlock::ClientOptions options;
  for (int i = 1; i < argc; ++i) options.nodes.emplace_back(argv[i]);
  auto client = dlock::Client::create(options);
  if (!client) return fail("client", client.error());
  auto other = dlock::Client::create(options);
  if (!other) return fail("second client", other.error());

  dlock::LockOptions lock_options;
  lock_options.ttl = 10s;
  auto lease = client->try_lock("consumer-check", lock_options);
  if (!lease) return fail("try_lock", lease.error());
  auto intruder = other->try_lock("consumer-check", lock_options);
  if (intruder || !intruder.error().is(dlock::errc::lock_held)) {
    std::fprintf(stderr, "dlock_consumer: a second client took a held lock\n");
    return 1;
  }
  if (auto r = lease->unlock(); !r) return fail("unlock", r.error());

  auto async_lease =
      dlock::async_try_lock(*other, "consumer-check", lock_options, asio::use_future).get();
  if (!async_lease) return fail("async_try_lock", async_lease.error());
  if (auto r = dlock::async_unlock(*async_lease, asio::use_future).get(); !r) {
    return fail("async_unlock", r.error());
  }
  std::printf("dlock_consumer: dlock %s, lock taken, refused to a second client, released\n",
              DLOCK_VERSION_STRING);
  return 0;
}

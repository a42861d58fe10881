// SPDX-License-Identifier: MIT
// dlock/result.h and dlock/errc.h: errors as values. Calls chain like std::expected, and
// contention (someone else holds the lock) is told apart from infrastructure trouble.
//   result_chain redis://127.0.0.1:6379 [more node URLs...]
#include <dlock/dlock.h>

#include <chrono>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  dlock::ClientOptions options;
  for (int i = 1; i < argc; ++i) options.nodes.emplace_back(argv[i]);
  if (options.nodes.empty()) options.nodes = {"redis://127.0.0.1:6379"};
  auto client = dlock::Client::create(options);
  if (!client) {
    std::cerr << client.error().message() << "\n";
    return 64;
  }
  // Take the lock, use its token, release it: the first error, from any step, comes out.
  dlock::Result<std::uint64_t> token =
      client->lock("example:chain", 2s).and_then([](dlock::Lease lease) {
        const std::uint64_t t = lease.fencing_token().value();
        return lease.unlock().transform([t] { return t; });
      });
  if (!token) {
    std::cerr << "lock cycle: " << token.error().message() << "\n";
    return 69;
  }
  std::cout << "cycle done with token " << *token << "\n";

  // A second owner while the first holds: contention, an expected outcome, not a fault.
  auto held = client->try_lock("example:chain");
  dlock::LockOptions other;
  other.owner = dlock::OwnerToken("someone-else");
  auto refused = client->try_lock("example:chain", other);
  const bool contention = !refused && dlock::is_contention(refused.error().code());
  std::cout << "second owner: "
            << refused.transform([](const dlock::Lease&) { return std::string("acquired"); })
                   .value_or("refused, " + std::string(contention ? "contention" : "a fault"))
            << "\n";
  return held && contention && held->unlock() ? 0 : 1;
}

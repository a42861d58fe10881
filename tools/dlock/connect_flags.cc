// SPDX-License-Identifier: MIT
#include "connect_flags.h"

#include <cstdlib>
#include <sstream>

#include "duration.h"

namespace dlock::cli {

void add_connect_flags(CLI::App& app, ConnectFlags& flags) {
  app.add_option("-r,--redis", flags.redis,
                 "Redis node URL, redis://[user:password@]host:port[/db] or rediss://...; repeat "
                 "for each node (default: $DLOCK_REDIS, comma-separated, else "
                 "redis://127.0.0.1:6379)")
      ->expected(1)
      // One URL per -r: without this CLI11 lets a vector option take the words after it, so
      // `-r URL NAME --json` took NAME as a second URL and failed with "name is required".
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--tls-ca", flags.tls_ca, "CA certificate file (PEM) for rediss:// nodes")
      ->envname("DLOCK_TLS_CA");
  app.add_option("--tls-cert", flags.tls_cert, "client certificate file (PEM)")
      ->envname("DLOCK_TLS_CERT");
  app.add_option("--tls-key", flags.tls_key, "client private key file (PEM)")
      ->envname("DLOCK_TLS_KEY");
  app.add_option("--node-timeout", flags.node_timeout,
                 "deadline for one command on one node (default 200ms)")
      ->envname("DLOCK_NODE_TIMEOUT");
}

std::vector<std::string> node_urls(const ConnectFlags& flags) {
  if (!flags.redis.empty()) return flags.redis;
  std::vector<std::string> urls;
  if (const char* env = std::getenv("DLOCK_REDIS"); env != nullptr && *env != '\0') {
    std::stringstream in(env);
    for (std::string url; std::getline(in, url, ',');) {
      if (!url.empty()) urls.push_back(url);
    }
  }
  if (urls.empty()) urls.emplace_back("redis://127.0.0.1:6379");
  return urls;
}

Result<Client> make_client(const ConnectFlags& flags) {
  ClientOptions options;
  options.nodes = node_urls(flags);
  options.tls.ca_file = flags.tls_ca;
  options.tls.cert_file = flags.tls_cert;
  options.tls.key_file = flags.tls_key;
  auto timeout = parse_duration(flags.node_timeout);
  if (!timeout) return std::move(timeout).error();
  options.node_timeout = *timeout;
  return Client::create(std::move(options));
}

}  // namespace dlock::cli

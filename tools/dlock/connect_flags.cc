// SPDX-License-Identifier: MIT
#include "connect_flags.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
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
  app.add_option("--redis-file", flags.redis_file,
                 "read the node URLs from this file (comma-separated or one per line; # "
                 "comments): keeps passwords out of ps, unlike -r (default: $DLOCK_REDIS_FILE)")
      // Not CLI11's envname: that would make an exported DLOCK_REDIS_FILE conflict with -r,
      // which must win over it (node_urls reads the variable).
      ->excludes("--redis");
  app.add_option("--tls-ca", flags.tls_ca, "CA certificate file (PEM) for rediss:// nodes")
      ->envname("DLOCK_TLS_CA");
  app.add_option("--tls-cert", flags.tls_cert, "client certificate file (PEM)")
      ->envname("DLOCK_TLS_CERT");
  app.add_option("--tls-key", flags.tls_key, "client private key file (PEM)")
      ->envname("DLOCK_TLS_KEY");
  app.add_option("--node-timeout", flags.node_timeout,
                 "deadline for one command on one node (default 200ms)")
      ->envname("DLOCK_NODE_TIMEOUT");
  app.add_flag("--allow-eviction", flags.allow_eviction,
               "let nodes vote whose maxmemory-policy may evict keys (an evicted lock is free "
               "to a second owner: use only where memory can never run out)")
      ->envname("DLOCK_ALLOW_EVICTION");
  app.add_flag("--start-from-quorum", flags.start_from_quorum,
               "let a lock set that no node remembers start once a quorum answers, not every "
               "node (restart protection then cannot tell a new set from one whose members all "
               "restarted empty)")
      ->envname("DLOCK_START_FROM_QUORUM");
}

namespace {

// Appends the comma-separated URLs of `text` (spaces around them ignored). A comma starts a new
// URL only where a scheme follows it: a sentinel URL keeps its own list of addresses
// (redis-sentinel://h1:26379,h2:26379/NAME).
void split_urls(const std::string& text, std::vector<std::string>& urls) {
  std::stringstream in(text);
  bool continued = false;  // urls.back() came from `text`
  for (std::string url; std::getline(in, url, ',');) {
    const auto first = url.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = url.find_last_not_of(" \t\r");
    url = url.substr(first, last - first + 1);
    if (continued && url.find("://") == std::string::npos) {
      urls.back() += "," + url;
    } else {
      urls.push_back(std::move(url));
    }
    continued = true;
  }
}

// scheme://user:password@host... : a password is what stands between the first ':' and the '@'
// of the authority.
bool has_password(const std::string& url) {
  const auto start = url.find("://");
  if (start == std::string::npos) return false;
  const auto authority_end = url.find('/', start + 3);
  const auto at = url.rfind('@', authority_end);
  if (at == std::string::npos || at < start + 3) return false;
  return url.find(':', start + 3) < at;
}

Result<std::vector<std::string>> urls_from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Error(errc::invalid_argument, "cannot read the node file " + path);
  }
  std::vector<std::string> urls;
  for (std::string line; std::getline(in, line);) {
    // A comment starts with '#' at the start of a line or after a blank: a '#' inside a URL
    // (a password may hold one) is kept.
    for (std::size_t hash = line.find('#'); hash != std::string::npos;
         hash = line.find('#', hash + 1)) {
      if (hash == 0 || line[hash - 1] == ' ' || line[hash - 1] == '\t') {
        line.erase(hash);
        break;
      }
    }
    split_urls(line, urls);
  }
  if (urls.empty())
    return Error(errc::invalid_argument, "the node file " + path + " names no node");
  struct stat st {};
  const bool secret = std::any_of(urls.begin(), urls.end(), has_password);
  if (secret && ::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
    std::cerr << "dlock: warning: " << path
              << " holds a password and other users may read it (chmod 600 it)\n";
  }
  return urls;
}

}  // namespace

Result<std::vector<std::string>> node_urls(const ConnectFlags& flags) {
  if (!flags.redis.empty()) {
    if (std::any_of(flags.redis.begin(), flags.redis.end(), has_password)) {
      std::cerr << "dlock: warning: a password given with -r is visible to other users (ps); "
                   "use DLOCK_REDIS or --redis-file\n";
    }
    return flags.redis;
  }
  if (!flags.redis_file.empty()) return urls_from_file(flags.redis_file);
  if (const char* file = std::getenv("DLOCK_REDIS_FILE"); file != nullptr && *file != '\0') {
    return urls_from_file(file);
  }
  std::vector<std::string> urls;
  if (const char* env = std::getenv("DLOCK_REDIS"); env != nullptr) split_urls(env, urls);
  if (urls.empty()) urls.emplace_back("redis://127.0.0.1:6379");
  return urls;
}

Result<Client> make_client(const ConnectFlags& flags, std::shared_ptr<Observer> observer) {
  ClientOptions options;
  options.observer = std::move(observer);
  auto urls = node_urls(flags);
  if (!urls) return std::move(urls).error();
  options.nodes = std::move(*urls);
  options.tls.ca_file = flags.tls_ca;
  options.tls.cert_file = flags.tls_cert;
  options.tls.key_file = flags.tls_key;
  auto timeout = parse_duration(flags.node_timeout);
  if (!timeout) return std::move(timeout).error();
  options.node_timeout = *timeout;
  options.allow_eviction = flags.allow_eviction;
  options.start_from_quorum = flags.start_from_quorum;
  return Client::create(std::move(options));
}

}  // namespace dlock::cli

// SPDX-License-Identifier: MIT
#include "net/node_address.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>
#include <optional>

namespace dlock::net {
namespace {

struct UrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};

// Reads one part of a parsed URL; an absent part is an empty string.
std::string url_part(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* out = nullptr;
  if (curl_url_get(u, part, &out, flags) != CURLUE_OK || out == nullptr) return {};
  std::string s(out);
  curl_free(out);
  return s;
}

Error bad_url(std::string_view url, const std::string& why) {
  // The URL may hold a password: show only what precedes the userinfo.
  std::string shown(url);
  if (auto at = shown.rfind('@'); at != std::string::npos) {
    auto scheme_end = shown.find("://");
    shown = shown.substr(0, scheme_end == std::string::npos ? 0 : scheme_end + 3) + "***" +
            shown.substr(at);
  }
  return Error(errc::invalid_argument, "invalid node URL '" + shown + "': " + why);
}

}  // namespace

NodeAddress NodeAddress::server_at(std::string other_host, std::uint16_t other_port) const {
  NodeAddress a = *this;
  a.kind = Kind::server;
  a.host = std::move(other_host);
  a.port = other_port;
  return a;
}

std::string NodeAddress::display() const {
  if (kind == Kind::sentinel) {
    std::string s = "redis-sentinel://" + (user.empty() ? "" : user + "@");
    for (std::size_t i = 0; i < sentinels.size(); ++i) {
      const auto& [h, p] = sentinels[i];
      s += (i == 0 ? "" : ",") + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" +
           std::to_string(p);
    }
    return s + "/" + master_name;
  }
  std::string s = tls ? "rediss" : "redis";
  s += kind == Kind::cluster ? "-cluster://" : "://";
  if (!user.empty()) s += user + "@";
  s += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  s += ":" + std::to_string(port);
  if (db != 0) s += "/" + std::to_string(db);
  return s;
}

std::string NodeAddress::identity() const {
  if (kind == Kind::sentinel) return display();
  std::string h = host;
  std::transform(h.begin(), h.end(), h.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (h == "localhost") h = "127.0.0.1";
  return h + ":" + std::to_string(port);
}

namespace {

// redis-sentinel://[user:password@]host[:port][,host[:port]...]/MASTER: each sentinel is parsed
// as a redis:// URL of its own (so hosts, ports and the user information follow one rule).
Result<NodeAddress> parse_sentinel_url(std::string_view url) {
  std::string_view rest = url.substr(std::string_view("redis-sentinel://").size());
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return bad_url(url, "no master name: redis-sentinel://host:port[,host:port...]/MASTER");
  }
  std::string_view hosts = rest.substr(0, slash);
  const std::string_view master = rest.substr(slash + 1);
  if (master.empty() || master.find_first_of("/?#@,") != std::string_view::npos) {
    return bad_url(url, "the master name after the last '/' must be one plain name");
  }
  std::string userinfo;
  if (const auto at = hosts.rfind('@'); at != std::string_view::npos) {
    userinfo = std::string(hosts.substr(0, at + 1));
    hosts.remove_prefix(at + 1);
  }
  NodeAddress addr;
  addr.kind = NodeAddress::Kind::sentinel;
  addr.master_name = std::string(master);
  for (std::size_t start = 0; start <= hosts.size();) {
    const auto comma = std::min(hosts.find(',', start), hosts.size());
    const std::string_view one = hosts.substr(start, comma - start);
    if (one.empty()) return bad_url(url, "an empty sentinel address");
    const auto colon = one.rfind(':');
    const bool has_port =
        colon != std::string_view::npos && one.find(']', colon) == std::string_view::npos;
    auto sentinel =
        parse_node_url("redis://" + userinfo + std::string(one) + (has_port ? "" : ":26379"));
    if (!sentinel)
      return bad_url(url, "sentinel '" + std::string(one) + "': " + sentinel.error().summary());
    if (addr.sentinels.empty()) {
      addr.host = sentinel->host;
      addr.port = sentinel->port;
      addr.user = sentinel->user;
      addr.password = sentinel->password;
    }
    addr.sentinels.emplace_back(sentinel->host, sentinel->port);
    start = comma + 1;
  }
  return addr;
}

// The database a URL's path names ("/2"), if any, into addr.db.
std::optional<Error> read_database(std::string_view url, const std::string& path,
                                   NodeAddress& addr) {
  if (path.empty() || path == "/") return std::nullopt;
  std::string_view db(path);
  db.remove_prefix(1);
  int value = -1;
  auto [end, ec] = std::from_chars(db.data(), db.data() + db.size(), value);
  if (ec != std::errc() || end != db.data() + db.size() || value < 0) {
    return bad_url(url, "database must be a number >= 0, got '" + std::string(db) + "'");
  }
  addr.db = value;
  if (addr.kind == NodeAddress::Kind::cluster && value != 0) {
    return bad_url(url, "a Redis Cluster has only database 0");
  }
  return std::nullopt;
}

}  // namespace

Result<NodeAddress> parse_node_url(std::string_view url) {
  if (url.empty()) return bad_url(url, "empty");
  if (url.find_first_of(" \t\r\n") != std::string_view::npos) {
    return bad_url(url, "contains white space");
  }
  NodeAddress addr;
  std::string s(url);
  if (url.starts_with("redis://")) {
    addr.tls = false;
  } else if (url.starts_with("rediss://")) {
    addr.tls = true;
  } else if (url.starts_with("redis-sentinel://")) {
    return parse_sentinel_url(url);
  } else if (url.starts_with("redis-cluster://") || url.starts_with("rediss-cluster://")) {
    addr.kind = NodeAddress::Kind::cluster;
    addr.tls = url.starts_with("rediss-");
    s.erase(s.find("-cluster"), 8);  // the rest parses as the seed server's URL
  } else {
    return bad_url(url,
                   "scheme must be redis://, rediss://, redis-cluster://, rediss-cluster:// or "
                   "redis-sentinel://");
  }
  std::unique_ptr<CURLU, UrlDeleter> u(curl_url());
  if (!u) return Error(errc::invalid_argument, "out of memory parsing URL");
  if (CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, s.c_str(), CURLU_NON_SUPPORT_SCHEME);
      rc != CURLUE_OK) {
    return bad_url(url, curl_url_strerror(rc));
  }
  addr.host = url_part(u.get(), CURLUPART_HOST);
  if (addr.host.size() >= 2 && addr.host.front() == '[' && addr.host.back() == ']') {
    addr.host = addr.host.substr(1, addr.host.size() - 2);
  }
  if (addr.host.empty()) return bad_url(url, "no host");
  if (std::string port = url_part(u.get(), CURLUPART_PORT); !port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return bad_url(url, "port must be 1-65535");
    }
    addr.port = static_cast<std::uint16_t>(value);
  }
  addr.user = url_part(u.get(), CURLUPART_USER, CURLU_URLDECODE);
  addr.password = url_part(u.get(), CURLUPART_PASSWORD, CURLU_URLDECODE);
  if (!url_part(u.get(), CURLUPART_QUERY).empty()) return bad_url(url, "query not supported");
  if (!url_part(u.get(), CURLUPART_FRAGMENT).empty()) return bad_url(url, "fragment not allowed");
  if (auto bad = read_database(url, url_part(u.get(), CURLUPART_PATH), addr)) return *bad;
  return addr;
}

}  // namespace dlock::net

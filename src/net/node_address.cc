// SPDX-License-Identifier: MIT
#include "net/node_address.h"

#include <arpa/inet.h>
#include <uriparser/Uri.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace dlock::net {
namespace {

// A URL parsed by uriparser (RFC 3986), freed when it goes; its ranges point into the string
// it was parsed from, which must outlive it. All of the string is parsed: a NUL inside it is a
// syntax error, not its end.
class ParsedUri {
 public:
  explicit ParsedUri(const std::string& s) {
    ok_ = uriParseSingleUriExA(&uri_, s.data(), s.data() + s.size(), nullptr) == URI_SUCCESS;
  }
  ~ParsedUri() {
    if (ok_) uriFreeUriMembersA(&uri_);  // a failed parse has freed what it made
  }
  ParsedUri(const ParsedUri&) = delete;
  ParsedUri& operator=(const ParsedUri&) = delete;

  bool ok() const { return ok_; }
  const UriUriA& operator*() const { return uri_; }
  const UriUriA* operator->() const { return &uri_; }

 private:
  UriUriA uri_{};
  bool ok_ = false;
};

// A part of a parsed URL as text; an absent part is empty, and so is a present empty one.
std::string text(const UriTextRangeA& range) {
  if (range.first == nullptr || range.afterLast == nullptr) return {};
  return std::string(range.first, range.afterLast);
}

bool present(const UriTextRangeA& range) {
  return range.first != nullptr;
}

// Percent-decoded ("s%40cret" -> "s@cret").
std::string decoded(std::string s) {
  if (s.empty()) return s;
  const char* end = uriUnescapeInPlaceExA(s.data(), URI_FALSE, URI_BR_DONT_TOUCH);
  s.resize(static_cast<std::size_t>(end - s.data()));
  return s;
}

// The URL with every byte of its userinfo (what comes before the authority's last '@') that RFC
// 3986 does not allow there percent-encoded, as curl's parser took them: generated passwords
// hold '^', '{', '%', '@', ... and users write them as they are. A valid "%XX" stays as it is.
// The authority ends at the first '/', '?' or '#' after "://" (so a password cannot hold those
// three unencoded, as before).
std::string with_userinfo_encoded(std::string s) {
  const auto start = s.find("://") + 3;
  const auto end = std::min(s.find_first_of("/?#", start), s.size());
  const auto at = s.rfind('@', end - 1);  // end > start > 0
  if (at == std::string::npos || at < start) return s;
  auto is_hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  std::string userinfo;
  for (std::size_t i = start; i < at; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool escape = c == '%' && i + 2 < at && is_hex(s[i + 1]) && is_hex(s[i + 2]);
    if (escape || std::isalnum(c) != 0 ||
        std::string_view("-._~!$&'()*+,;=:").find(static_cast<char>(c)) != std::string_view::npos) {
      userinfo += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      userinfo += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return s.substr(0, start) + userinfo + s.substr(at);
}

// The path as written, "" or "/" or "/2" ("/a/b" for two segments).
std::string path_of(const UriUriA& uri) {
  std::string path;
  for (const UriPathSegmentA* segment = uri.pathHead; segment != nullptr; segment = segment->next) {
    path += "/" + text(segment->text);
  }
  return path;
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
    const bool has_colon =
        colon != std::string_view::npos && one.find(']', colon) == std::string_view::npos;
    // "host:" has no port either: the sentinel's default, not the server's.
    const std::string_view written =
        has_colon && colon + 1 == one.size() ? one.substr(0, colon) : one;
    const bool has_port = has_colon && colon + 1 < one.size();
    auto sentinel =
        parse_node_url("redis://" + userinfo + std::string(written) + (has_port ? "" : ":26379"));
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
    // A password with a '/' in it ends up here: then the path is not repeated.
    const bool secret = url.find('@') != std::string_view::npos;
    return bad_url(url, "database must be a number >= 0" +
                            (secret ? std::string() : ", got '" + std::string(db) + "'"));
  }
  addr.db = value;
  if (addr.kind == NodeAddress::Kind::cluster && value != 0) {
    return bad_url(url, "a Redis Cluster has only database 0");
  }
  return std::nullopt;
}

// The host of a parsed URL into addr.host: an IPv6 literal without its brackets, or an IPv4
// address or DNS name (percent-decoded) of letters, digits, '-', '.' and '_'. An address is
// written in its one standard form ("127.1", "2130706433", "0x7f.0.0.1" as "127.0.0.1"; "::0001"
// as "::1"), so that one server written two ways is one identity (the check that no node is
// given twice, on which the quorum's count of votes rests).
std::optional<Error> read_host(std::string_view url, const UriUriA& uri, NodeAddress& addr) {
  if (uri.hostData.ipFuture.first != nullptr) return bad_url(url, "IPvFuture hosts not supported");
  char standard[INET6_ADDRSTRLEN] = {};
  if (uri.hostData.ip6 != nullptr) {
    if (inet_ntop(AF_INET6, uri.hostData.ip6->data, standard, sizeof standard) == nullptr) {
      return bad_url(url, "bad IPv6 address");
    }
    addr.host = standard;
    return std::nullopt;
  }
  addr.host = decoded(text(uri.hostText));
  if (addr.host.empty()) return bad_url(url, "no host");
  // inet_aton: the forms curl's parser and the resolver take for IPv4 (parts in decimal, octal
  // or hex, fewer than four parts).
  if (in_addr ipv4{}; inet_aton(addr.host.c_str(), &ipv4) != 0 &&
                      inet_ntop(AF_INET, &ipv4, standard, sizeof standard) != nullptr) {
    addr.host = standard;
    return std::nullopt;
  }
  const bool plain = std::all_of(addr.host.begin(), addr.host.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_';
  });
  if (!plain) {
    return bad_url(url,
                   "the host must be a name of letters, digits, '-', '.' and '_', an IPv4 "
                   "address or an [IPv6] literal");
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
  s = with_userinfo_encoded(std::move(s));
  const ParsedUri uri(s);
  // (uriparser's error position is where it stopped, often the end: not shown.)
  if (!uri.ok()) return bad_url(url, "not a URL (RFC 3986)");
  if (auto bad = read_host(url, *uri, addr)) return *bad;
  if (std::string port = text(uri->portText); !port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return bad_url(url, "port must be 1-65535");
    }
    addr.port = static_cast<std::uint16_t>(value);
  }
  const std::string userinfo = text(uri->userInfo);
  const auto colon = userinfo.find(':');
  addr.user = decoded(userinfo.substr(0, colon));
  if (colon != std::string::npos) addr.password = decoded(userinfo.substr(colon + 1));
  // The user is shown (display(), errors and logs), the password never is.
  if (std::any_of(addr.user.begin(), addr.user.end(),
                  [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    return bad_url(url, "the user name holds a control character");
  }
  if (present(uri->query)) return bad_url(url, "query not supported");
  if (present(uri->fragment)) return bad_url(url, "fragment not allowed");
  if (auto bad = read_database(url, path_of(*uri), addr)) return *bad;
  return addr;
}

}  // namespace dlock::net

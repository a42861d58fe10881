// SPDX-License-Identifier: MIT
#include "net/node_address.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>

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

std::string NodeAddress::display() const {
  std::string s = tls ? "rediss://" : "redis://";
  if (!user.empty()) s += user + "@";
  s += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  s += ":" + std::to_string(port);
  if (db != 0) s += "/" + std::to_string(db);
  return s;
}

std::string NodeAddress::identity() const {
  std::string h = host;
  std::transform(h.begin(), h.end(), h.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (h == "localhost") h = "127.0.0.1";
  return h + ":" + std::to_string(port);
}

Result<NodeAddress> parse_node_url(std::string_view url) {
  if (url.empty()) return bad_url(url, "empty");
  if (url.find_first_of(" \t\r\n") != std::string_view::npos) {
    return bad_url(url, "contains white space");
  }
  NodeAddress addr;
  if (url.starts_with("redis://")) {
    addr.tls = false;
  } else if (url.starts_with("rediss://")) {
    addr.tls = true;
  } else {
    return bad_url(url, "scheme must be redis:// or rediss://");
  }
  std::unique_ptr<CURLU, UrlDeleter> u(curl_url());
  if (!u) return Error(errc::invalid_argument, "out of memory parsing URL");
  const std::string s(url);
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
  std::string path = url_part(u.get(), CURLUPART_PATH);
  if (!path.empty() && path != "/") {
    std::string_view db(path);
    db.remove_prefix(1);
    int value = -1;
    auto [end, ec] = std::from_chars(db.data(), db.data() + db.size(), value);
    if (ec != std::errc() || end != db.data() + db.size() || value < 0) {
      return bad_url(url, "database must be a number >= 0, got '" + std::string(db) + "'");
    }
    addr.db = value;
  }
  return addr;
}

}  // namespace dlock::net

// SPDX-License-Identifier: MIT
#include "service/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dlock::service {

namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// RFC 6750's b64token: what a bearer token may be made of, so it passes any HTTP header.
bool is_b64token(std::string_view token) {
  const auto body_end = token.find_last_not_of('=');
  if (body_end == std::string_view::npos) return false;  // empty, or only '='
  for (std::size_t i = 0; i <= body_end; ++i) {
    const char c = token[i];
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
    if (!ok) return false;
  }
  return true;
}

bool has_control(std::string_view text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    std::size_t end = i;
    while (end < line.size() && !is_blank(line[end])) ++end;
    if (end > i) fields.push_back(line.substr(i, end - i));
    i = end;
  }
  return fields;
}

bool is_comment_or_blank(std::string_view line) {
  const auto first = line.find_first_not_of(" \t");
  return first == std::string_view::npos || line[first] == '#';
}

// Why a line's fields are not a token entry, or "" when they are. Never quotes the token.
std::string line_error(const std::vector<std::string_view>& fields) {
  if (!is_b64token(fields[0])) {
    return "the token may hold only letters, digits and -._~+/ (then '=' padding)";
  }
  if (fields[0].size() < kMinTokenLength) {
    return "the token is shorter than " + std::to_string(kMinTokenLength) + " characters";
  }
  if (fields.size() < 2) return "a token without a name prefix (`*` allows every name)";
  for (std::size_t i = 1; i < fields.size(); ++i) {
    if (has_control(fields[i])) return "a control character in prefix " + std::to_string(i);
    if (fields[i] == "*" && fields.size() > 2) return "`*` (every name) stands alone";
  }
  return "";
}

}  // namespace

std::string_view bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() || !is_blank(authorization[kScheme.size()])) {
    return {};
  }
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c) != kScheme[i]) return {};
  }
  std::string_view token = authorization.substr(kScheme.size());
  token.remove_prefix(std::min(token.find_first_not_of(" \t"), token.size()));
  while (!token.empty() && is_blank(token.back())) token.remove_suffix(1);
  return token;
}

Result<Tokens> Tokens::parse(std::string_view text, const std::string& source) {
  Tokens tokens;
  std::size_t number = 0;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++number;
    if (is_comment_or_blank(line)) continue;
    const auto where = source + ":" + std::to_string(number) + ": ";
    const auto fields = fields_of(line);
    if (auto why = line_error(fields); !why.empty())
      return Error(errc::invalid_argument, where + why);
    Entry entry;
    entry.digest = digest(fields[0]);
    if (tokens.find(fields[0])) {
      return Error(errc::invalid_argument, where + "the same token as an earlier line");
    }
    if (fields[1] != "*") entry.prefixes.assign(fields.begin() + 1, fields.end());
    tokens.entries_.push_back(std::move(entry));
  }
  if (tokens.entries_.empty()) {
    return Error(errc::invalid_argument,
                 source + ": no token (every request would be refused): write `TOKEN PREFIX...`");
  }
  return tokens;
}

Result<Tokens> Tokens::load(const std::string& path) {
  std::error_code ec;
  std::ifstream in(path, std::ios::binary);
  if (!in || std::filesystem::is_directory(path, ec)) {
    return Error(errc::invalid_argument, "cannot read the token file " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error(errc::invalid_argument, "cannot read the token file " + path);
  return parse(text.str(), path);
}

Tokens::Digest Tokens::digest(std::string_view token) {
  Digest out{};
  unsigned int size = 0;
  // SHA-256 cannot fail on a buffer in memory; a failure would leave zeros, which no token
  // hashes to, so it would only refuse.
  (void)EVP_Digest(token.data(), token.size(), out.data(), &size, EVP_sha256(), nullptr);
  return out;
}

std::optional<std::size_t> Tokens::find(std::string_view token) const {
  const Digest wanted = digest(token);
  std::optional<std::size_t> found;
  // Every entry is compared, in constant time, whichever matches: how long this takes does
  // not depend on the token (digests are all 32 bytes, so not on its length either).
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    const bool same = CRYPTO_memcmp(wanted.data(), entries_[i].digest.data(), wanted.size()) == 0;
    if (same) found = i;
  }
  return found;
}

Outcome<std::size_t> Tokens::authenticate(std::string_view authorization) const {
  const std::string_view token = bearer_token(authorization);
  if (token.empty()) {
    return Failure{Code::unauthenticated,
                   "no bearer token: send the header `Authorization: Bearer TOKEN`"};
  }
  auto entry = find(token);
  if (!entry) return Failure{Code::unauthenticated, "unknown bearer token"};
  return *entry;
}

std::string Tokens::id(std::size_t entry) const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (std::size_t i = 0; i < 6; ++i) {
    const unsigned char b = entries_.at(entry).digest[i];
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

std::optional<Failure> Tokens::authorize(std::size_t entry, std::string_view name) const {
  const auto& prefixes = entries_.at(entry).prefixes;
  if (prefixes.empty()) return std::nullopt;
  for (const std::string& prefix : prefixes) {
    if (name.substr(0, prefix.size()) == prefix) return std::nullopt;
  }
  return Failure{Code::permission_denied, "this token may not use the name '" + std::string(name) +
                                              "' (outside its prefixes)"};
}

}  // namespace dlock::service

// SPDX-License-Identifier: MIT
#include <dlock/fenced_store.h>

#include "core/client_core.h"
#include "lock/keys.h"
#include "scripts/script.h"

namespace dlock {
namespace {

// The single node's outcome as a Result: transport errors and error replies become Errors.
Result<resp::Reply> only_outcome(node::NodeSet& nodes, node::Outcomes outcomes) {
  auto& o = outcomes.front();
  if (!o) {
    return Error(o.error().code(), o.error().summary(),
                 {NodeError{nodes.address(0).display(), o.error().code(), o.error().summary()}});
  }
  if (o->is_error()) {
    return Error(
        errc::server_error, o->str,
        {NodeError{nodes.address(0).display(), make_error_code(errc::server_error), o->str}});
  }
  return std::move(*o);
}

}  // namespace

Result<FencedStore> FencedStore::connect(const std::string& url, ClientOptions options) {
  options.nodes = {url};
  auto core = detail::ClientCore::create(options);
  if (!core) return std::move(core).error();
  return FencedStore(std::move(*core));
}

Result<bool> FencedStore::write(std::string_view key, std::string_view value, FencingToken token) {
  if (key.empty()) return Error(errc::invalid_argument, "key must not be empty");
  if (token.value() == 0) return Error(errc::invalid_argument, "fencing token must be positive");
  auto& nodes = core_->nodes();
  auto reply =
      only_outcome(nodes, nodes.run_script(scripts::fenced_write(),
                                           {std::string(key), lock::accepted_token_key(key)},
                                           {std::string(value), std::to_string(token.value())}));
  if (!reply) return std::move(reply).error();
  if (!reply->is_array() || reply->elements.size() != 2 || !reply->elements[0].is_integer()) {
    return Error(errc::protocol_error, "unexpected reply to fenced_write");
  }
  return reply->elements[0].integer == 1;
}

Result<std::optional<std::string>> FencedStore::read(std::string_view key) {
  auto& nodes = core_->nodes();
  auto reply = only_outcome(nodes, nodes.run_command({"GET", std::string(key)}));
  if (!reply) return std::move(reply).error();
  if (reply->is_nil()) return std::optional<std::string>();
  return std::optional<std::string>(reply->str);
}

Result<FencedStore::FencedRead> FencedStore::read(std::string_view key, FencingToken token) {
  if (key.empty()) return Error(errc::invalid_argument, "key must not be empty");
  if (token.value() == 0) return Error(errc::invalid_argument, "fencing token must be positive");
  auto& nodes = core_->nodes();
  auto reply =
      only_outcome(nodes, nodes.run_script(scripts::fenced_read(),
                                           {std::string(key), lock::accepted_token_key(key)},
                                           {std::to_string(token.value())}));
  if (!reply) return std::move(reply).error();
  if (!reply->is_array() || reply->elements.size() != 2 || !reply->elements[0].is_integer()) {
    return Error(errc::protocol_error, "unexpected reply to fenced_read");
  }
  FencedRead out;
  out.accepted = reply->elements[0].integer == 1;
  if (out.accepted && !reply->elements[1].is_nil()) out.value = reply->elements[1].str;
  return out;
}

Result<FencingToken> FencedStore::last_token(std::string_view key) {
  auto& nodes = core_->nodes();
  auto reply = only_outcome(nodes, nodes.run_command({"GET", lock::accepted_token_key(key)}));
  if (!reply) return std::move(reply).error();
  if (reply->is_nil()) return FencingToken();
  try {
    return FencingToken(std::stoull(reply->str));
  } catch (const std::exception&) {
    return Error(errc::protocol_error, "accepted token is not a number: " + reply->str);
  }
}

}  // namespace dlock

// SPDX-License-Identifier: MIT
#include "node/node.h"

#include "resp/encode.h"

namespace dlock::node {
namespace {

std::string encode_eval(std::string_view verb, std::string_view body,
                        const std::vector<std::string>& keys,
                        const std::vector<std::string>& args) {
  const std::string nkeys = std::to_string(keys.size());
  std::vector<std::string_view> argv{verb, body, nkeys};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return resp::encode_command(argv);
}

}  // namespace

void Node::eval(const scripts::Script& script, const std::vector<std::string>& keys,
                const std::vector<std::string>& args, net::Clock::time_point deadline,
                net::Connection::Callback done) {
  connection_.send(
      encode_eval("EVALSHA", script.sha1, keys, args), deadline,
      [this, &script, keys, args, deadline, done = std::move(done)](Result<resp::Reply> r) mutable {
        if (r && r->is_error_code("NOSCRIPT")) {
          connection_.send(encode_eval("EVAL", script.source, keys, args), deadline,
                           std::move(done));
          return;
        }
        done(std::move(r));
      });
}

void Node::command(const std::vector<std::string>& args, net::Clock::time_point deadline,
                   net::Connection::Callback done) {
  std::vector<std::string_view> argv(args.begin(), args.end());
  connection_.send(resp::encode_command(argv), deadline, std::move(done));
}

}  // namespace dlock::node

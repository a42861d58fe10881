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

NodeResult result_of(const Result<resp::Reply>& r) {
  if (r) return r->is_error() ? NodeResult::error : NodeResult::ok;
  return r.error().is(errc::cancelled) ? NodeResult::not_waited_for : NodeResult::error;
}

}  // namespace

Node::Node(asio::io_context& io, net::NodeAddress address, net::ConnectionOptions options,
           MessageHandler on_message, std::size_t index, Observer* observer)
    : index_(index),
      observer_(observer),
      display_(observer != nullptr ? address.display() : std::string()),
      connection_(io, address, options),
      subscriber_(io, address, options),
      resubscribe_timeout_(options.connect_timeout) {
  // Load every script on each new connection, before the fast path can take it: a request the
  // fast path stops waiting for (it returned at a quorum) could otherwise meet NOSCRIPT with
  // nobody left to send the source. Only SCRIPT FLUSH on a live server can still cause that,
  // and then only on a minority of nodes, which the quorum does without.
  connection_.set_on_ready([this] {
    const auto deadline = net::Clock::now() + resubscribe_timeout_;
    for (const auto* script : scripts::all()) {
      connection_.send(resp::encode_command({"SCRIPT", "LOAD", script->source}), deadline,
                       [](Result<resp::Reply>) {});
    }
  });
  subscriber_.set_push_handlers(
      [on_message = std::move(on_message)](const resp::Reply& push) {
        if (on_message) on_message(push.elements[1].str, push.elements[2].str);
      },
      [this] {
        // A new connection has no subscriptions: take them up again. Messages published while
        // we were away are lost; waiters also wake when the holder's ttl runs out.
        const auto deadline = net::Clock::now() + resubscribe_timeout_;
        for (const auto& channel : channels_) {
          subscriber_.send(resp::encode_command({"SUBSCRIBE", channel}), deadline,
                           [](Result<resp::Reply>) {});
        }
      });
}

void Node::run(std::shared_ptr<const std::vector<Call>> calls, std::size_t c,
               net::Clock::time_point deadline, net::Connection::Callback done) {
  if (observer_ != nullptr) {
    // Timed from here to the reply (a NOSCRIPT retry included). A round that had its quorum
    // stops waiting for the rest (errc::cancelled): reported as such, not as a node failure.
    done = [this, start = net::Clock::now(), done = std::move(done)](Result<resp::Reply> r) {
      observer_->node_request(
          NodeRequestEvent{index_, display_, net::Clock::now() - start, result_of(r)});
      done(std::move(r));
    };
  }
  const Call& call = (*calls)[c];
  if (call.script == nullptr) {
    std::vector<std::string_view> argv(call.keys.begin(), call.keys.end());
    return connection_.send(resp::encode_command(argv), deadline, std::move(done));
  }
  connection_.send(encode_eval("EVALSHA", call.script->sha1, call.keys, call.args), deadline,
                   [this, calls = std::move(calls), c, deadline,
                    done = std::move(done)](Result<resp::Reply> r) mutable {
                     if (r && r->is_error_code("NOSCRIPT")) {
                       const Call& again = (*calls)[c];
                       connection_.send(
                           encode_eval("EVAL", again.script->source, again.keys, again.args),
                           deadline, std::move(done));
                       return;
                     }
                     done(std::move(r));
                   });
}

void Node::subscribe(const std::string& channel, net::Clock::time_point deadline,
                     net::Connection::Callback done) {
  channels_.insert(channel);
  subscriber_.set_keep_connected(true);
  subscriber_.send(resp::encode_command({"SUBSCRIBE", channel}), deadline, std::move(done));
}

void Node::unsubscribe(const std::string& channel) {
  if (channels_.erase(channel) == 0) return;
  if (channels_.empty()) subscriber_.set_keep_connected(false);
  subscriber_.send(resp::encode_command({"UNSUBSCRIBE", channel}),
                   net::Clock::now() + resubscribe_timeout_, [](Result<resp::Reply>) {});
}

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
#include "node/server_node.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>

#include "resp/encode.h"

namespace dlock::node {
namespace {

using resp::put;
using resp::put_header;
using resp::put_size;

// Written straight into one buffer, through a pointer into room sized beforehand (no vector of
// views, no growing, no per-piece capacity checks): every lock cycle encodes two of these. The
// buffer is the thread's, reused (Connection::send copies the bytes out): no allocation per
// request. It keeps the size of the largest command encoded (a full renewal batch, tens of
// KiB). Valid until the thread's next encode_eval. `record_known`: the call's record_known_arg
// is sent as its record_known_value.
std::string_view encode_eval(std::string_view verb, std::string_view body, const Call& call,
                             std::string_view publish_verb, bool record_known = false) {
  thread_local std::string out;
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, call.keys.size()).ptr;
  const std::string_view nkeys(digits, static_cast<std::size_t>(end - digits));
  const bool publishes = call.script->publishes;
  const std::size_t size = put_size({}) + put_size(verb) + put_size(body) + put_size(nkeys) +
                           (publishes ? put_size(publish_verb) : 0) + call.keys.bytes() +
                           call.args.bytes() +
                           put_size({}) * (call.keys.size() + call.args.size()) +
                           (record_known ? call.record_known_value.size() : 0);
  if (out.size() < size) out.resize(size);
  char* p =
      put_header(out.data(), '*', 3 + call.keys.size() + call.args.size() + (publishes ? 1 : 0));
  for (const std::string_view s : {verb, body, nkeys}) p = put(p, s);
  call.keys.for_each([&p](std::string_view k) { p = put(p, k); });
  if (!record_known) {
    call.args.for_each([&p](std::string_view a) { p = put(p, a); });
  } else {
    std::size_t i = 0;
    call.args.for_each([&p, &i, &call](std::string_view a) {
      p = put(p, i++ == call.record_known_arg ? call.record_known_value : a);
    });
  }
  if (publishes) p = put(p, publish_verb);
  return std::string_view(out.data(), static_cast<std::size_t>(p - out.data()));
}

// What dlock needs of an ACL user, added to a NOPERM reply: the server says only that a key, a
// channel or a command was denied, not which one dlock needed.
constexpr std::string_view kAclNeeds =
    " (dlock's ACL user needs: keys ~dlock:* and the lock names (~NAME, or a pattern such as "
    "~app:*), channels &dlock:*, and the commands EVAL, EVALSHA, INFO, PING, SUBSCRIBE, "
    "UNSUBSCRIBE, PUBLISH, SET, EXISTS, GET and INCR; see docs/safety.md)";

// EVALSHA refused for good: an ACL that denies it (some services allow scripts through EVAL
// only), or a server that renamed it away (rename-command EVALSHA; Redis quotes the name as
// dlock sent it).
bool evalsha_refused(const resp::Reply& r) {
  return (r.is_error_code("NOPERM") && r.str.find("'evalsha'") != std::string::npos) ||
         r.str.find("unknown command 'EVALSHA'") != std::string::npos;
}

// A script refused by EVALSHA that EVAL may still run: NOSCRIPT (a restarted or flushed
// server), or EVALSHA refused for good.
bool eval_may_run(const resp::Reply& r) {
  return r.is_error_code("NOSCRIPT") || evalsha_refused(r);
}

// What dlock needs of a server that renamed EVAL away, in place of Redis's "with args beginning
// with: ..." (the first 128 bytes of a script's source).
constexpr std::string_view kEvalNeeded =
    "ERR unknown command 'EVAL': dlock runs every lock operation as a Lua script, by EVALSHA "
    "or EVAL; keep EVAL (and EVALSHA) under their own names (rename-command) and allowed";

}  // namespace

ServerNode::ServerNode(asio::io_context& io, net::NodeAddress address,
                       net::ConnectionOptions options, MessageHandler on_message, std::size_t index,
                       Observer* observer, Sharding sharding)
    : index_(index),
      observer_(observer),
      display_(observer != nullptr ? address.display() : std::string()),
      sharding_(std::move(sharding)),
      coalescer_(io,
                 [this](std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                        net::Connection::Callback done) {
                   send_observed(std::move(call), deadline, std::move(done), false);
                 }),
      connection_(io, address, options),
      subscriber_(io, address, options),
      resubscribe_timeout_(options.connect_timeout) {
  connection_.set_on_ready([this] { greet_connection(); });
  subscriber_.set_push_handlers(
      [this, on_message](const resp::Reply& push) {
        if (push.elements[0].str == "sunsubscribe") {
          // The server dropped a shard channel (its slot moved to another shard).
          const std::string channel = push.elements[1].str;
          if (channels_.erase(channel) == 0) return;
          if (channels_.empty()) subscriber_.set_keep_connected(false);
          if (sharding_.on_dropped) sharding_.on_dropped(channel);
          return;
        }
        if (on_message) on_message(push.elements[1].str, push.elements[2].str);
      },
      [this, on_message] {  // a copy: the order the two lambdas are made in is unspecified
        // A new connection has no subscriptions: take them up again. Messages published while
        // we were away are lost (a server's CLIENT KILL or output buffer limit, a restart), so
        // once a channel is subscribed again its waiters are woken to try again (an empty
        // payload wakes them all, Waiters::on_message): a release missed meanwhile would
        // otherwise leave them asleep until the holder's ttl, the lock free.
        const bool again = subscriber_.epoch() > 1;
        const auto deadline = net::Clock::now() + resubscribe_timeout_;
        const char* verb = sharding_.sharded_pubsub ? "SSUBSCRIBE" : "SUBSCRIBE";
        for (const auto& channel : channels_) {
          subscriber_.send(resp::encode_command({verb, channel}), deadline,
                           [again, channel, on_message](Result<resp::Reply> r) {
                             if (again && r && !r->is_error() && on_message)
                               on_message(channel, "");
                           });
        }
      });
}

void ServerNode::greet_connection() {
  // Load every script on each new connection, before the fast path can take it: a request the
  // fast path stops waiting for (it returned at a quorum) could otherwise meet NOSCRIPT with
  // nobody left to send the source. Only SCRIPT FLUSH on a live server can still cause that,
  // and then only on a minority of nodes, which the quorum does without.
  const auto deadline = net::Clock::now() + resubscribe_timeout_;
  read_only_epoch_.store(0, std::memory_order_release);  // nothing known of this server yet
  // Replies come in order: every load has answered when CONFIG GET does.
  auto loaded = std::make_shared<std::atomic<bool>>(true);
  for (const auto* script : scripts::all()) {
    connection_.send(resp::encode_command({"SCRIPT", "LOAD", script->source}), deadline,
                     [](Result<resp::Reply>) {});
    if (!script->has_unguarded()) continue;
    connection_.send(resp::encode_command({"SCRIPT", "LOAD", script->unguarded_source}), deadline,
                     [loaded](Result<resp::Reply> r) {
                       if (!r || r->is_error()) loaded->store(false, std::memory_order_relaxed);
                     });
  }
  ask_read_only(deadline, std::move(loaded));
  if (sharding_.on_reconnect) sharding_.on_reconnect();
}

void ServerNode::ask_read_only(net::Clock::time_point deadline,
                               std::shared_ptr<const std::atomic<bool>> loaded) {
  connection_.send(resp::encode_command({"CONFIG", "GET", "replica-read-only"}), deadline,
                   [this, loaded = std::move(loaded)](Result<resp::Reply> r) {
                     learn_read_only(r, loaded.get());
                   });
}

namespace {
std::int64_t nanos(net::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
}  // namespace

void ServerNode::learn_read_only(const Result<resp::Reply>& reply,
                                 const std::atomic<bool>* loaded) {
  const auto now = net::Clock::now();
  if (!reply) {
    // Not answered (the connection failed, or a borrower stopped waiting): nothing learned;
    // asked again with the next script.
    recheck_at_.store(0, std::memory_order_relaxed);
    return;
  }
  // A reply is read on the connection it was sent on: this one.
  const std::uint64_t epoch = connection_.epoch();
  if (loaded != nullptr && loaded->load(std::memory_order_relaxed)) {
    loaded_epoch_.store(epoch, std::memory_order_release);
  }
  if (reply->is_error_code("BUSY") || reply->is_error_code("LOADING")) {
    // Busy with another program's slow script, or loading its data: no answer yet, not a no.
    // Asked again with the next script (unguarded() asks on a connection whose texts loaded
    // even while it does not trust it); the trust it had ends by its time.
    recheck_at_.store(0, std::memory_order_relaxed);
    return;
  }
  // ["replica-read-only", "yes"]; anything else (no, an error: CONFIG renamed, disabled or
  // denied) keeps the check, and is not asked again on this connection.
  const bool yes = reply->is_array() && reply->elements.size() == 2 &&
                   reply->elements[1].str == "yes" &&
                   loaded_epoch_.load(std::memory_order_acquire) == epoch;
  trusted_until_.store(yes ? nanos(now + kReadOnlyTrust) : 0, std::memory_order_release);
  recheck_at_.store(yes ? nanos(now + kReadOnlyTrust / 2) : kNever, std::memory_order_relaxed);
  read_only_epoch_.store(yes ? epoch : 0, std::memory_order_release);
}

bool ServerNode::unguarded(const scripts::Script& script, std::uint64_t epoch,
                           net::Clock::time_point deadline) {
  if (!script.has_unguarded() || epoch == 0 ||
      loaded_epoch_.load(std::memory_order_acquire) != epoch) {
    return false;
  }
  const std::int64_t now = nanos(net::Clock::now());
  std::int64_t due = recheck_at_.load(std::memory_order_relaxed);
  // One sender per question: the one that moves the time on. Sent before the script, whose
  // text is chosen by the answer before it. Also while not trusted: a question that was
  // answered BUSY is asked again (a no never is: kNever).
  if (now >= due && recheck_at_.compare_exchange_strong(due, kNever, std::memory_order_relaxed)) {
    ask_read_only(deadline, nullptr);
  }
  if (read_only_epoch_.load(std::memory_order_acquire) != epoch) return false;
  // A server that closed this idle connection is found out by the send (which reconnects), too
  // late for a request bound to this epoch: it would fail instead of going on the next
  // connection. So the checked text, unbound, whenever the server may be gone.
  if (connection_.closed_by_server()) return false;
  return now < trusted_until_.load(std::memory_order_acquire);
}

void ServerNode::run(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                     net::Connection::Callback done) {
  if (call->batch.script != nullptr && sharding_.group_commit && coalescer_.here()) {
    // Observed here, once per call, whichever way it goes (alone, in a batch, or again alone
    // after a batch left it alone), timed from now to its reply.
    return coalescer_.add(std::move(call), deadline,
                          observed(observer_, index_, display_, std::move(done)));
  }
  send(std::move(call), deadline, std::move(done), false);
}

void ServerNode::run_asking(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                            net::Connection::Callback done) {
  send(std::move(call), deadline, std::move(done), true);
}

void ServerNode::send(std::shared_ptr<const Call> shared, net::Clock::time_point deadline,
                      net::Connection::Callback done, bool asking) {
  // Timed from here to the reply (a NOSCRIPT retry included).
  send_observed(std::move(shared), deadline, observed(observer_, index_, display_, std::move(done)),
                asking);
}

void ServerNode::send_observed(std::shared_ptr<const Call> shared, net::Clock::time_point deadline,
                               net::Connection::Callback done, bool asking) {
  const Call& call = *shared;
  if (call.script == nullptr) {
    std::vector<std::string_view> argv(call.keys.begin(), call.keys.end());
    const std::string command = resp::encode_command(argv);
    ask(asking, deadline);  // after the encoding (see ask)
    return connection_.send(command, deadline, std::move(done));
  }
  send_script(std::move(shared), deadline, std::move(done), asking);
}

void ServerNode::send_script(std::shared_ptr<const Call> shared, net::Clock::time_point deadline,
                             net::Connection::Callback done, bool asking, bool native_read) {
  const Call& call = *shared;
  // The unguarded text only on the connection whose server is known to refuse it as a
  // replica, and bound to it (see run()); so is an acquisition that skips the record's check.
  const std::uint64_t epoch = connection_.ready_epoch();
  const bool bare = unguarded(*call.script, epoch, deadline);
  bool record_known = false;
  if (sharding_.remembers_records && call.record_known_arg != std::string_view::npos &&
      call.record_ttl) {
    // Not on a connection the server may have closed: the request would fail bound to it,
    // where as built it goes on the next connection (as unguarded() decides).
    record_known = records_.covers(call.record_ttl->count(), epoch, deadline) &&
                   !connection_.closed_by_server();
    // The native form checks no role: only where the server refuses writes as a replica by
    // itself (`bare`: replica-read-only yes, as for a script's unguarded text).
    if (record_known && bare && !native_read && call.native.encode != nullptr && !asking &&
        call.min_replicas == 0 && native_refused_epoch_.load(std::memory_order_relaxed) != epoch) {
      return send_native(std::move(shared), deadline, std::move(done), epoch);
    }
    if (!record_known) done = learning_record(call, std::move(done));
  }
  // After learning_record: the record window learns from grants that count, once confirmed.
  if (call.min_replicas > 0) done = guarded(call, deadline, std::move(done));
  // NOSCRIPT (and an ACL that denies EVALSHA) is answered by reissue(), which the connection
  // asks before `done`; so is a NOPERM completed with what dlock's ACL user needs.
  const bool eval_only = eval_only_.load(std::memory_order_relaxed);
  std::string kept;
  const std::string_view command = asked_first(
      asking, deadline,
      eval_only
          ? encode_eval("EVAL", call.script->text(bare), call, publish_verb(), record_known)
          : encode_eval("EVALSHA", call.script->sha(bare), call, publish_verb(), record_known),
      kept);
  connection_.send(command, deadline, std::move(done),
                   net::Connection::Reissue{this, std::move(shared), asking},
                   bare || record_known ? epoch : 0);
}

void ServerNode::send_native(std::shared_ptr<const Call> shared, net::Clock::time_point deadline,
                             net::Connection::Callback done, std::uint64_t epoch) {
  thread_local std::string out;  // as encode_eval's: the connection copies the bytes
  out.clear();
  const Call& call = *shared;
  call.native.encode(call, out);
  // Bound to the epoch the record window covers; its replies go to reissue(), which reads them
  // or sends the script (no callback of its own: an allocation per acquisition, issue 32).
  const std::uint32_t replies = call.native.replies;
  connection_.send(out, deadline, std::move(done),
                   net::Connection::Reissue{this, std::move(shared), false}, epoch, replies);
}

namespace {

// A native form's command refused by the server for good: an ACL without the command (not one
// without a key, which the script meets as well, with what dlock's user needs added), or a
// command renamed away.
bool native_refused(const resp::Reply& replies) {
  return std::any_of(replies.elements.begin(), replies.elements.end(), [](const resp::Reply& r) {
    return r.is_error() &&
           ((r.is_error_code("NOPERM") && r.str.find("permissions to run") != std::string::npos) ||
            r.str.find("unknown command") != std::string::npos);
  });
}

}  // namespace

net::Connection::Callback ServerNode::learning_record(const Call& call,
                                                      net::Connection::Callback done) {
  // Sent as built, the script checks the record: a grant says it reaches 1.5 ttl past the
  // script's run, which came after now. A reply is read on the connection it was sent on (a
  // NOSCRIPT's EVAL included: the same text), so its epoch is the one the window is bound to.
  return [this, ttl = call.record_ttl->count(), drift = call.record_drift, granted = call.granted,
          sent = net::Clock::now(), done = std::move(done)](Result<resp::Reply> r) mutable {
    if (r && granted != nullptr && granted(*r)) {
      records_.granted(ttl, drift, connection_.epoch(), sent);
    }
    done(std::move(r));
  };
}

bool ServerNode::reissue(resp::Reply& reply, const std::shared_ptr<const void>& subject,
                         bool asking, net::Clock::time_point deadline,
                         net::Connection::Callback& done) {
  if (reply.is_array()) {
    // A native form's replies (no script's reply is ever offered here but an error).
    const Call& native = *static_cast<const Call*>(subject.get());
    const NativeReading reading = native.native.read(native, reply);
    if (reading == NativeReading::answered) return false;
    if (native_refused(reply)) {
      native_refused_epoch_.store(connection_.epoch(), std::memory_order_relaxed);
    }
    // One script call, in the request's place (a NOSCRIPT of it is reissued as any script's).
    auto call = reading == NativeReading::script_after
                    ? std::make_shared<const Call>(native.native.after(native))
                    : std::static_pointer_cast<const Call>(subject);
    send_script(std::move(call), deadline, std::move(done), asking, /*native_read=*/true);
    return true;
  }
  if (!eval_may_run(reply)) {
    if (reply.is_error_code("NOPERM")) reply.str += kAclNeeds;
    if (reply.str.find("unknown command 'EVAL'") != std::string::npos) reply.str = kEvalNeeded;
    return false;
  }
  // Denied or renamed, not missing: EVAL from now on (SCRIPT LOAD is denied too).
  if (evalsha_refused(reply)) eval_only_.store(true, std::memory_order_relaxed);
  const Call& again = *static_cast<const Call*>(subject.get());
  // Chosen again as send() chooses (on the connection the refusal came on).
  const std::uint64_t epoch = connection_.ready_epoch();
  const bool bare = unguarded(*again.script, epoch, deadline);
  // ASKING holds for the one command after it: both are queued back to back on this thread.
  std::string kept;
  const std::string_view command = asked_first(
      asking, deadline, encode_eval("EVAL", again.script->text(bare), again, publish_verb()), kept);
  // With a reissuer again, for the hint on a NOPERM (an EVAL's never matches eval_may_run).
  connection_.send(command, deadline, std::move(done),
                   net::Connection::Reissue{this, subject, asking}, bare ? epoch : 0);
  return true;
}

void ServerNode::ask(bool asking, net::Clock::time_point deadline) {
  if (asking) connection_.send(resp::encode_command({"ASKING"}), deadline, [](auto) {});
}

std::string_view ServerNode::asked_first(bool asking, net::Clock::time_point deadline,
                                         std::string_view encoded, std::string& kept) {
  if (!asking) return encoded;
  // Copied out of the thread's encoding buffer first: sending ASKING may fail a connection the
  // server closed, whose callbacks may encode into that buffer again.
  kept.assign(encoded);
  ask(asking, deadline);
  return kept;
}

net::Connection::Callback ServerNode::guarded(const Call& call, net::Clock::time_point deadline,
                                              net::Connection::Callback done) {
  // WAIT goes on the connection the script's reply came on, after it: it covers the script's
  // writes (WAIT counts what this connection wrote), whichever way the script got there.
  return [this, replicas = call.min_replicas, timeout = call.replica_timeout, deadline,
          done = std::move(done)](Result<resp::Reply> r) mutable {
    if (!r || r->is_error()) return done(std::move(r));
    const std::string n = std::to_string(replicas);
    const std::string ms = std::to_string(timeout.count());
    connection_.send(
        resp::encode_command({"WAIT", n, ms}), deadline,
        [r = std::move(r), replicas, n, ms, done = std::move(done)](Result<resp::Reply> w) mutable {
          if (!w) return done(std::move(w).error());
          if (w->is_integer() && w->integer >= static_cast<long long>(replicas)) {
            return done(std::move(r));
          }
          resp::Reply refused;
          refused.type = resp::Reply::Type::error;
          refused.str = "REPLICAS " +
                        (w->is_integer() ? std::to_string(w->integer) : "WAIT: " + w->str) +
                        " of " + n + " replicas confirmed the write within " + ms + " ms";
          done(std::move(refused));
        });
  };
}

void ServerNode::subscribe(const std::string& channel, net::Clock::time_point deadline,
                           net::Connection::Callback done) {
  channels_.insert(channel);
  subscriber_.set_keep_connected(true);
  subscriber_.send(
      resp::encode_command({sharding_.sharded_pubsub ? "SSUBSCRIBE" : "SUBSCRIBE", channel}),
      deadline, std::move(done));
}

void ServerNode::unsubscribe(const std::string& channel) {
  if (channels_.erase(channel) == 0) return;
  if (channels_.empty()) subscriber_.set_keep_connected(false);
  subscriber_.send(
      resp::encode_command({sharding_.sharded_pubsub ? "SUNSUBSCRIBE" : "UNSUBSCRIBE", channel}),
      net::Clock::now() + resubscribe_timeout_, [](Result<resp::Reply>) {});
}

}  // namespace dlock::node

// SPDX-License-Identifier: MIT
// ServerNode: one Redis server as a lock node: a command connection, and a second connection
// of its own for pub/sub (RESP2 needs one). A cluster's shard is one too, with sharded pub/sub.
#pragma once

#include <dlock/observer.h>

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "net/connection.h"
#include "node/call.h"
#include "node/coalescer.h"
#include "node/node.h"
#include "node/record_window.h"
#include "scripts/script.h"

namespace dlock::node {

// How a ServerNode behaves in its role: a plain node, a Redis Cluster shard (node/cluster_node.h)
// or a server of a Sentinel-managed group (node/sentinel_node.h).
struct Sharding {
  // SSUBSCRIBE / SUNSUBSCRIBE and SPUBLISH instead of the classic commands (a cluster shard).
  bool sharded_pubsub = false;
  // A shard channel the server dropped by itself (its slot moved away): the channel is
  // forgotten here, the owner subscribes again where the slot went. Io thread.
  std::function<void(const std::string& channel)> on_dropped;
  // After each new command connection (the server may be a new process). Io thread.
  std::function<void()> on_reconnect;
  // Group commit (node/coalescer.h) of the calls with a batch form run on the io thread. Off for
  // a cluster's shard: the cluster routes each call by its keys and names the node keys of
  // its slot, which a batch call of another shape would escape.
  bool group_commit = true;
  // Acquisitions skip the script's check of the record of lease ttls while a grant seen on the
  // same connection says it covers them (node/record_window.h). Only for a plain node: a
  // cluster keeps one record per slot, and a Sentinel-managed master confirms its record on
  // the replicas (node/replica_confirm.h), which a skipped check would not write.
  bool remembers_records = false;
};

class ServerNode final : public Node, private net::Connection::Reissuer {
 public:
  // How long a server's `replica-read-only yes` is trusted after it came: a script sent later
  // gets the checked text until the server said yes again. It is asked again after half of
  // this, with the next script, so that a busy connection never waits for the answer. An
  // operator's CONFIG SET to `no` followed by a demotion is so noticed within this much
  // (docs/safety.md).
  static constexpr std::chrono::milliseconds kReadOnlyTrust{1000};

  // `observer` (may be null) hears of every request run() makes, as node `index`.
  ServerNode(asio::io_context& io, net::NodeAddress address, net::ConnectionOptions options,
             MessageHandler on_message, std::size_t index = 0, Observer* observer = nullptr,
             Sharding sharding = {});

  // A script by EVALSHA, and on NOSCRIPT (a restarted or flushed server has lost its script
  // cache) once more with the full source by EVAL, within the same deadline; or a plain
  // command. A server whose ACL denies EVALSHA gets every script by EVAL from then on. A script
  // that publishes (Script::publishes) gets this node's PUBLISH verb as its last argument. A
  // NOPERM reply is completed with what dlock's ACL user needs. So is a server that renamed
  // EVALSHA away (rename-command); one without EVAL is named as such in the error.
  //
  // A script with an unguarded text (scripts::Script::unguarded_source: no role check, a
  // shebang that a read-only replica refuses up front) is sent that text only on a connection
  // whose server said `replica-read-only yes` at most kReadOnlyTrust ago (CONFIG GET, asked on
  // every new connection after the scripts are loaded, and again with the scripts while it
  // keeps saying yes) and loaded every unguarded text there (a server before Redis 7 cannot: no
  // shebang), and only bound to that connection (net::Connection::send's epoch): a request that
  // would meet a new connection gets the checked text, or fails if the connection went after it was
  // chosen. A CONFIG refused (renamed, disabled, an ACL without it) keeps the check on that
  // connection.
  //
  // An acquisition (Call::record_known_arg) goes with that argument changed while this node
  // knows its server's record of lease ttls covers it (Sharding::remembers_records), bound to
  // the connection it learnt that on; then, with a native form (Call::native) and no replica
  // guard or ASKING, as those plain commands (the script after them when their reading says
  // so, on the same connection: docs/protocol.md, "The native acquisition").
  //
  // A call with a batch form (Call::batch) run on the io thread may go in one batch call with
  // others (group commit, node/coalescer.h), unless Sharding::group_commit is off; on a thread
  // that borrowed the connection it goes alone.
  void run(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
           net::Connection::Callback done) override;
  // run(), preceded by ASKING (a cluster's ASK redirection to this server). Io thread.
  void run_asking(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                  net::Connection::Callback done);
  void subscribe(const std::string& channel, net::Clock::time_point deadline,
                 net::Connection::Callback done) override;
  void unsubscribe(const std::string& channel) override;

  net::Connection* lendable_connection() noexcept override { return &connection_; }
  bool closed_by_server() override { return connection_.closed_by_server(); }
  const net::NodeAddress& address() const noexcept override { return connection_.address(); }
  std::uint64_t epoch() const noexcept override { return connection_.epoch(); }

 private:
  void send(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
            net::Connection::Callback done, bool asking);
  // send(), for a `done` the observer already hears of (the coalescer's calls). A call with a
  // native form goes as its plain commands where it would skip the record's check (see run()).
  void send_observed(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                     net::Connection::Callback done, bool asking);
  // send_observed() of the script itself; `native_read`: the call's native form was sent and
  // not answered by its reading (then never sent so again).
  void send_script(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                   net::Connection::Callback done, bool asking, bool native_read = false);
  // The call's native form, bound to connection epoch `epoch` (its reply to reissue()).
  void send_native(std::shared_ptr<const Call> call, net::Clock::time_point deadline,
                   net::Connection::Callback done, std::uint64_t epoch);
  // The replies of a call's native form (an array): read into the script's reply, or the
  // script sent in their place (`subject` is the Call; or the form's `after` call, when the
  // reading says so). A command refused by the server's ACL or unknown to it (rename-command)
  // sends every later call on that connection as its script.
  // A script's reply of NOSCRIPT, or NOPERM for EVALSHA (an ACL that allows EVAL only, kept
  // from then on): the script sent again by EVAL with its source (`subject` is its Call,
  // `asking` whether ASKING goes first), in the request's place. Any other NOPERM gets what
  // dlock's ACL user needs added. The EVAL sent carries this reissuer again, for that hint only
  // (an EVAL is never answered NOSCRIPT, and its NOPERM names 'eval'), so it never loops.
  bool reissue(resp::Reply& reply, const std::shared_ptr<const void>& subject, bool asking,
               net::Clock::time_point deadline, net::Connection::Callback& done) override;
  std::string_view publish_verb() const {
    return sharding_.sharded_pubsub ? "spublish" : "publish";
  }
  // ASKING, before a call that a cluster's ASK redirection sends to this server. Only once the
  // call is encoded: an encoding that throws (bad_alloc) must not leave a lone ASKING on the
  // connection, which would then hold for whatever command came next.
  void ask(bool asking, net::Clock::time_point deadline);
  // `encoded`, the call's command, once ASKING went first if `asking` (then its bytes are
  // copied into `kept`); what to send.
  std::string_view asked_first(bool asking, net::Clock::time_point deadline,
                               std::string_view encoded, std::string& kept);
  // On a new connection: loads every script (and unguarded text), then asks replica-read-only.
  void greet_connection();
  // Asks CONFIG GET replica-read-only on the command connection; `loaded` (null for a
  // recheck): whether every unguarded text loaded on it, known when the answer comes.
  void ask_read_only(net::Clock::time_point deadline,
                     std::shared_ptr<const std::atomic<bool>> loaded);
  void learn_read_only(const Result<resp::Reply>& reply, const std::atomic<bool>* loaded);
  // Whether `script` goes unguarded on connection epoch `epoch` (0: a new connection), now;
  // sends the next CONFIG GET first when one is due (any thread that may send).
  bool unguarded(const scripts::Script& script, std::uint64_t epoch,
                 net::Clock::time_point deadline);
  // `done`, after the record window learnt from a grant of `call` sent now with the record's
  // check (Sharding::remembers_records).
  net::Connection::Callback learning_record(const Call& call, net::Connection::Callback done);
  // `done`, called only once WAIT confirmed call.min_replicas replicas (the replica guard).
  net::Connection::Callback guarded(const Call& call, net::Clock::time_point deadline,
                                    net::Connection::Callback done);

  // Declared before the connections, so they outlive any callback a connection runs as it goes.
  const std::size_t index_;
  Observer* const observer_;
  const std::string display_;  // the address for the observer (password elided)
  const Sharding sharding_;
  // Before the connections as well: a batch call's callback, run by a connection as it goes,
  // reaches it. Io thread only.
  Coalescer coalescer_;
  net::Connection connection_;
  net::Connection subscriber_;
  std::set<std::string> channels_;  // io thread only
  // The server's ACL denies EVALSHA: scripts go by EVAL (the io thread or a borrower sets it).
  std::atomic<bool> eval_only_{false};
  // The connection epoch whose server refused a command of a native form (ACL, rename-command):
  // scripts only on it (0: none). A new connection tries again (an ACL fixed, another server).
  std::atomic<std::uint64_t> native_refused_epoch_{0};
  // The connection epoch whose server loaded every unguarded text, and the one whose server
  // said replica-read-only yes at the last answer (0: none). Any thread.
  std::atomic<std::uint64_t> loaded_epoch_{0};
  std::atomic<std::uint64_t> read_only_epoch_{0};
  // While the server says yes (steady clock, ns): when to ask again, and until when the last
  // yes is trusted.
  std::atomic<std::int64_t> recheck_at_{0};
  std::atomic<std::int64_t> trusted_until_{0};
  // The record of lease ttls as the grants on the command connection showed it. Any thread.
  RecordWindow records_;
  const std::chrono::milliseconds resubscribe_timeout_;
};

}  // namespace dlock::node

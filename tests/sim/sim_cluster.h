// SPDX-License-Identifier: MIT
// SimCluster: the simulated nodes of one schedule, shared by its clients, and the seeded
// choices of what goes wrong: per call and per node a fault (below), node restarts within the
// profile's bound, and requests held back to run late.
//
// Faults, one per node per round of calls (a round's requests share a connection, so they fare
// alike):
//   none            delivered, executed, answered
//   reply_lost      executed, but the client gets errc::timeout (the connection may be dropped)
//   unsent          not executed; errc::io_error; the connection is dropped
//   late            kept and executed on that node at a later step, after later calls (a stalled
//                   connection's buffered request running after the client reconnected); the
//                   client gets errc::timeout and its connection is replaced
//   error_reply     not executed; an error reply (as BUSY, LOADING or OOM), the connection kept
//   slow_reply      executed and answered, but the answer takes 2 to 30 ms (a slow network path
//                   or a preempted client): a round that waits for it ends that much later, so
//                   the client's next step starts later than it planned (seed 58 of
//                   MinorityRestartsWithPermits/N5 needed that between a greeting and a renewal)
//   restart_before  the node restarts before executing (state wiped, new run_id); io_error
//   restart_after   the node executes, then restarts before answering; io_error
// A restart replaces every client's connection to that node (their epochs change).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "node/call.h"
#include "sim/sim_node.h"
#include "sim/sim_trace.h"

namespace dlock::sim {

class SimFanout;

// The only source of choices in a schedule: a seed replays them. It also keeps a digest of
// every draw, in order: two runs of a seed made the same choices exactly when their digests and
// draw counts agree (DLOCK_SIM_DIGEST, sim_test.cc), which is how a change to the simulation's
// machinery is checked not to change what the schedules explore.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo + 1)));
  }
  double uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }
  std::string hex(std::size_t chars);

  std::uint64_t digest() const { return digest_; }
  std::uint64_t draws() const { return draws_; }

 private:
  std::uint64_t next() {
    const std::uint64_t v = gen_();
    digest_ = mix(digest_ ^ v);
    ++draws_;
    return v;
  }
  // splitmix64's finaliser: every bit of a draw reaches every bit of the digest.
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::mt19937_64 gen_;
  std::uint64_t digest_ = 0;
  std::uint64_t draws_ = 0;
};

enum class Fault {
  none,
  reply_lost,
  unsent,
  late,
  error_reply,
  slow_reply,
  restart_before,
  restart_after
};
const char* fault_name(Fault f);

// How restarts are bounded. minority: at most a minority of the nodes restart within one
// restart window (the largest ttl plus its drift: docs/safety.md asks for restarts "no sooner
// than one max ttl apart"). majority: no bound; expected to be unsafe.
enum class Profile { minority, majority };

struct ClusterOptions {
  std::size_t nodes = 3;
  Profile profile = Profile::minority;
  double fault_rate = 0.1;     // the chance that a round to one node meets a fault
  double restart_share = 0.1;  // of the faults, the share that are restarts
  Clock::duration restart_window{};
  Mutation mutation = Mutation::none;
  // Half of the restarts are failovers to a lagging replica (SimNode::fail_over), which keeps
  // replicating at random steps (tick()).
  bool failovers = false;
  // In a quarter of the clusters of 3 nodes or more, node 0 may evict keys with a ttl (and
  // says so in INFO): it evicts one now and then (tick()).
  bool evictions = false;
  // Directed schedules: a fault to force for (client, node, the round's first call); nullopt
  // leaves the choice to the seed. Restarts forced here bypass the profile.
  std::function<std::optional<Fault>(std::size_t, std::size_t, const node::Call&)> plan;
  // Review: runs just before a round's calls are delivered to a node; in_order: nodes in index
  // order.
  std::function<void(std::size_t, std::size_t, const node::Call&)> before_deliver;
  bool in_order = false;
  // Group commit (node/coalescer.h) on every node: a call with a batch form runs through its
  // batch script (SimCluster::execute) together with the round's other calls of its kind and,
  // at random, late calls of its kind waiting for the node. Off in the directed schedules
  // written before it (their choices stay what they were), on in the sweeps.
  bool batching = false;
  // With batching: the chance that a call alone goes through its batch script (a batch of one;
  // the coalescer sends it as itself), and that a late call of the kind joins a batch call.
  double batch_of_one = 0.5;
  double late_joins = 0.5;
  // Directed schedules: runs after a batch call, before a call the batch left alone (nil) is
  // sent alone: (client, node, that call).
  std::function<void(std::size_t, std::size_t, const node::Call&)> before_resend;
};

class SimCluster {
 public:
  SimCluster(const ClusterOptions& options, Rng& rng, Trace& trace, Clock::time_point origin);

  std::size_t size() const { return nodes_.size(); }
  SimNode& node(std::size_t i) { return *nodes_[i]; }
  Rng& rng() { return rng_; }
  Trace& trace() { return trace_; }
  const Trace& trace() const { return trace_; }
  void attach(SimFanout& fanout) { fanouts_.push_back(&fanout); }
  const ClusterOptions& options() const { return options_; }

  // A round of calls begins: its faults are all picked before any is delivered.
  void begin_round() { reserved_.assign(size(), false); }
  // The fault for one round of `client`'s calls to node i.
  Fault pick_fault(std::size_t client, std::size_t i, const node::Call& first);
  // Whether node i may restart now under the profile.
  bool may_restart(std::size_t i) const;
  void restart(std::size_t i, const std::string& why);
  // Node i's address now reaches its promoted replica (SimNode::fail_over).
  void fail_over(std::size_t i, const std::string& why);
  // Between two steps: replicas catch up, evicting nodes evict.
  void tick();

  // Runs `calls` of `client` on node i, one after another, and returns their replies; with
  // options().batching a call with a batch form goes in a batch call (run_batch). `alone`: the
  // form a server node sends a lone call in when its record window covers it (sim_fanout.h),
  // run instead of a batch call that would hold only that call; `*sent_alone` then says so.
  // `answered`: the client hears the replies (else it gave up on them: a lost reply, a restart
  // after the call), which a native form's fallback needs.
  std::vector<resp::Reply> execute(std::size_t client, std::size_t i,
                                   const std::vector<node::Call>& calls,
                                   const std::vector<node::Call>* alone = nullptr,
                                   bool* sent_alone = nullptr, bool answered = true);

  // Keeps `calls` of `client` to run on node i at a later step (dropped if the node restarts).
  // `native`: the lone call was sent as its native form, and runs so (run_native).
  void defer(std::size_t client, std::size_t i, const std::vector<node::Call>& calls,
             bool native = false);
  // Runs the held-back calls that are due at `step` (all of them with flush()).
  void run_due(std::size_t step);
  void flush() { run_due(~std::size_t{0}); }
  void set_step(std::size_t step) { step_ = step; }

  // The faults of the latest round of acquire calls (any client).
  void note_acquire_round(const std::vector<Fault>& faults) { acquire_faults_ = faults; }
  // How many nodes restarted since `t` or gave the latest acquire round no answer: the
  // "failed between two acquisitions" of docs/features.md.
  std::size_t failed_since(Clock::time_point t) const;
  // How many nodes restarted (or failed over) since `t`.
  std::size_t restarted_since(Clock::time_point t) const;

  // The longest delay with which a late call about `name` ran (it stretches how long the
  // name's keys may live).
  Clock::duration late_delay(const std::string& name) const;

  // Every (name, hold id) named by acquire or renew calls since the last take_touched().
  void note(const std::vector<node::Call>& calls);
  std::vector<std::pair<std::string, std::string>> take_touched();

  struct Stats {
    std::map<std::string, std::size_t> faults;  // by fault_name
    std::size_t restarts = 0;                   // failovers included
    std::size_t failovers = 0;
    std::size_t late_runs = 0;
    // Group commit: batch calls run, their items, the late ones among them, and the items a
    // batch left alone (nil) that were then run alone.
    std::size_t batch_calls = 0;
    std::size_t batch_items = 0;
    std::size_t batch_late_items = 0;
    std::size_t batch_left_alone = 0;
    // Lone acquisitions a client's record window covered: sent with ARGV[7] 'nr'/'r'
    // (sim_fanout.h). Whether the node then skipped the record: SimNode::records_skipped().
    std::size_t record_known_sent = 0;
    // Of those, sent as the native acquisition's plain commands (run_native): granted by them,
    // answered by acquire.lua after them, and the commands of other connections run between two
    // of them.
    std::size_t native_sent = 0;
    std::size_t native_granted = 0;
    std::size_t native_to_script = 0;
    std::size_t native_interleaved = 0;
    std::size_t native_after_write = 0;  // acquire.lua told what the commands wrote
    std::size_t native_set_only = 0;     // the connection broke after the SET
    std::size_t native_unanswered = 0;   // the client never heard the replies: no fallback
  };
  Stats& stats() { return stats_; }
  // Grants that skipped the max-ttl record, on every node (SimNode::records_skipped).
  std::size_t records_skipped() const;

 private:
  struct Deferred {
    std::size_t client;
    std::size_t node;
    std::uint64_t generation;
    std::size_t due;
    Clock::time_point sent;
    std::vector<node::Call> calls;
    bool native = false;
  };
  ClusterOptions options_;
  Rng& rng_;
  Trace& trace_;
  std::vector<std::unique_ptr<SimNode>> nodes_;
  std::vector<std::optional<Clock::time_point>> restarted_at_;  // the latest restart per node
  std::vector<Fault> acquire_faults_;
  // Nodes given a restart fault in the current round, not yet restarted: they count against
  // the profile's bound already.
  std::vector<bool> reserved_;
  std::vector<SimFanout*> fanouts_;
  // A restart or a failover of node i: the bookkeeping both share.
  void replace(std::size_t i, bool failover, const std::string& why);

  // One call of a batch: a call of the round (`reply`: where its reply goes) or a late one
  // (`late`: its reply is dropped).
  struct Item {
    const node::Call* call;
    resp::Reply* reply;
    const Deferred* late;
  };
  // The late calls waiting for node i whose calls all have the batch form of `kind`'s, each
  // taken out at random to join a batch call.
  std::vector<Deferred> take_late(std::size_t i, const node::Call& kind);
  // The items as one batch call on node i (a single one as itself, at random), in a random
  // order; each item gets its element of the reply, or, for nil, its own call's reply, run
  // alone right after.
  void run_batch(std::size_t client, std::size_t i, std::vector<Item> items);
  // `call` sent as its native form (node::NativeForm) on node i, as a server node sends it:
  // the client's own encoding, each command a step of its own, with the late calls of other
  // connections to the node (any client's, due or not) each run between two of them at random,
  // as other connections' commands may run on a real server; the client's own reading of the
  // replies and, when it is not a grant and the client hears it (`answered`), after another
  // chance for late calls (the round trip), acquire.lua (as sent alone, or the form's `after`
  // call). Unanswered, the connection may have broken after the SET: the rest never runs.
  resp::Reply run_native(std::size_t i, const node::Call& call, bool answered);
  // Between two commands of a native form on node i: other connections' late calls.
  void interleave(std::size_t i);
  // A late call ran at last: counted, traced, and its names' keys may live that much longer.
  void ran_late(const Deferred& d, const node::Call& call, const resp::Reply& r, const char* how);

  std::vector<Deferred> deferred_;
  std::map<std::string, Clock::duration> late_delay_;
  std::vector<std::pair<std::string, std::string>> touched_;
  std::size_t step_ = 0;
  Stats stats_;
};

// The lock names a call is about (none for hello and INFO).
std::vector<std::string> names_of(const node::Call& call);

}  // namespace dlock::sim
